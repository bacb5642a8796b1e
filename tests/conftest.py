from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PUBLIC_LOGS = REPO.parent / "shared" / "public_logs" / "tlparse"


@pytest.fixture
def public_logs() -> Path:
    """The public tlparse test logs beside the checkout (never copied into the repo)."""
    if not PUBLIC_LOGS.is_dir():
        pytest.skip(f"public tlparse logs not present at {PUBLIC_LOGS}")
    return PUBLIC_LOGS


@pytest.fixture
def store(tmp_path):
    from ingest.store import Store
    return Store.open(tmp_path / "store" / "cw.duckdb")
