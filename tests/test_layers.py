"""The layering in HOUSE_STYLE (collectors -> ingest -> app, ingest free of torch/streamlit) holds."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_hold():
    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists():
        pytest.skip("import-linter not installed")
    r = subprocess.run([str(exe)], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ingest_runs_without_torch_or_streamlit():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['streamlit'] = None\n"
            "import compilewatch.cli, ingest.loader, ingest.summary, ingest.trace, ingest.text\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
