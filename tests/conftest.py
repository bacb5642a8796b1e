from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PUBLIC_LOGS = REPO.parent / "shared" / "public_logs" / "tlparse"


@pytest.fixture(autouse=True)
def _review_left_to_the_visitor(monkeypatch):
    """The writers' refresh of the Overview's kept review (app/review_refresh.py) off, as
    COMPILEWATCH_REVIEW_REFRESH=0 turns it off: the process each `compilewatch ingest` starts for it
    would outlive its test and read a store that pytest is removing. tests/app/test_review_refresh.py
    turns it back on."""
    monkeypatch.setenv("COMPILEWATCH_REVIEW_REFRESH", "0")


@pytest.fixture
def public_logs() -> Path:
    """The public tlparse test logs beside the checkout (never copied into the repo)."""
    if not PUBLIC_LOGS.is_dir():
        pytest.skip(f"public tlparse logs not present at {PUBLIC_LOGS}")
    return PUBLIC_LOGS


@pytest.fixture(scope="session")
def c_compiler() -> bool:
    """Whether an install here can build setup.py's extension (the text reader's loop in C): a C
    compiler and the Python headers. Where it cannot, the install goes on without it."""
    import shutil
    import sysconfig
    return bool(shutil.which("cc") or shutil.which("gcc")) and \
        Path(sysconfig.get_paths()["include"], "Python.h").exists()


@pytest.fixture
def store(tmp_path):
    from compilewatch.store import open_store
    return open_store(tmp_path / "store" / "cw.duckdb")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL (Debian's package) in a temp folder on a free loopback port, for the session.
    Skipped, with the reason, only where it is not installed (scripts/setup.sh --dev installs it as root)."""
    import shutil
    import tempfile

    from compilewatch.core.errors import StoreError
    from compilewatch.store.pglocal import LocalPostgres, bin_dir
    try:
        bin_dir()
    except StoreError as e:
        pytest.skip(str(e))
    # Not under pytest's 0700 temp root: the server runs as the postgres user when we are root.
    folder = tempfile.mkdtemp(prefix="cw-pg-")
    pg = LocalPostgres(folder).start()
    yield pg
    pg.stop("immediate")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lake_spec(postgres, request):
    """A fresh catalog database for one test: its DuckLake spec."""
    import re
    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:50]
    postgres.create_database(name, fresh=True)
    return postgres.lake_spec(name)


@pytest.fixture
def lake_store(lake_spec, tmp_path):
    from compilewatch.store import open_store
    s = open_store(lake_spec, tmp_path / "lake-data")
    yield s
    s.close()
