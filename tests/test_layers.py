"""The floors hold: pyproject.toml's import-linter contracts (one `layers` contract naming every
floor top to bottom, plus what no floor below the dashboard may import) pass on an installed copy,
and fail as soon as one module imports upward.

import-linter walks a package's folder, so it runs on a non-editable install, where every room sits
under compilewatch/ as it will in site-packages (the repository keeps them as top-level folders).
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    if not LINT.exists():
        pytest.skip("import-linter not installed")
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(REPO)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"pip could not build here: {r.stderr[-300:]}")
    return target


def _lint(site: Path, cwd: Path) -> subprocess.CompletedProcess:
    shutil.copy(REPO / "pyproject.toml", cwd / "pyproject.toml")
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}, timeout=300)


def test_import_contracts_hold(installed, tmp_path):
    r = _lint(installed, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "floors:" in r.stdout and "KEPT" in r.stdout


@pytest.mark.parametrize("floor, upward", [("core/settings.py", "compilewatch.store"),
                                          ("store/derived.py", "compilewatch.ingest.loader"),
                                          ("ingest/loader.py", "compilewatch.review.weekly")])
def test_an_upward_import_breaks_the_contract(installed, tmp_path, floor, upward):
    site = tmp_path / "site"
    shutil.copytree(installed / "compilewatch", site / "compilewatch")
    module = site / "compilewatch" / floor
    module.write_text(module.read_text() + f"\nimport {upward}  # upward on purpose\n")
    work = tmp_path / "work"
    work.mkdir()
    r = _lint(site, work)
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout


def test_ingest_runs_without_torch_or_streamlit():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['streamlit'] = None\n"
            "import compilewatch.cli, compilewatch.ingest.loader, compilewatch.ingest.summary, "
            "compilewatch.ingest.trace, compilewatch.ingest.text, compilewatch.store\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
