"""Fixtures for dashboard tests: stores filled by ingesting real logs (never hand-written rows), an
empty store, and an AppTest factory pointed at one through COMPILEWATCH_DB (sample_logs bootstrap
switched off)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compilewatch.store import open_store

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


TESTS = Path(__file__).resolve().parents[1]
CORRUPTED_TRACE = TESTS.parents[1] / "shared" / "public_logs" / "tlparse" / "tlparse__inputs__simple_corrupted_json.log"


@pytest.fixture(scope="session")
def team_db(sample_db, tmp_path_factory) -> Path:
    """A team's store as the dashboard meets it: everything in sample_logs/ (H100, H200 and CPU
    bundles, 2026-11-22..24) plus the CPU regression runs of tests/fixtures/review/ (23-24), the
    TORCH_TRACE fixtures (22-23), a run of one of those trace scripts collected again three days
    later (tests/fixtures/app/, 25: the same breaks recurring) and tlparse's corrupted trace (a run
    with an ingest error). Built on a copy of `sample_db`, so sample_logs are parsed once."""
    from compilewatch.ingest.loader import ingest_paths

    folder = tmp_path_factory.mktemp("team") / "store"
    shutil.copytree(sample_db.parent, folder)
    path = folder / sample_db.name
    extra = (sorted((TESTS / "fixtures" / "review").rglob("*.tar.gz")) + sorted((TESTS / "fixtures" / "trace").glob("*.log.gz"))
             + sorted((TESTS / "fixtures" / "app").glob("*.tar.gz")))
    extra += [CORRUPTED_TRACE] if CORRUPTED_TRACE.exists() else []    # public logs: read when present
    report = ingest_paths(open_store(path), extra)
    assert [f.status for f in report.files if f.status not in ("stored", "partial")] == []
    return path


@pytest.fixture(scope="session")
def real_db(tmp_path_factory) -> Path:
    """Real logs (tests/fixtures: TORCH_TRACE from torch 2.13, TORCH_LOGS from PyTorch issues) through the loader."""
    from compilewatch.ingest.loader import ingest_paths

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    path = tmp_path_factory.mktemp("real") / "compilewatch.duckdb"
    store = open_store(path)
    logs = sorted((fixtures / "trace").glob("*.log.gz")) + sorted((fixtures / "text").glob("*.log"))
    report = ingest_paths(store, logs)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return path


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory) -> Path:
    """sample_logs/ (the collector's real bundles) through the loader, as the dashboard's first start
    does; skipped while the folder is still empty."""
    from compilewatch.app import bootstrap
    from compilewatch.ingest.loader import ingest_paths

    paths = bootstrap._sample_paths(Path(__file__).resolve().parents[2] / "sample_logs")
    if not paths:
        pytest.skip("sample_logs/ is empty")
    path = tmp_path_factory.mktemp("samples") / "compilewatch.duckdb"
    report = ingest_paths(open_store(path), paths)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return path


@pytest.fixture(scope="session")
def corrupted_run(team_db) -> str:
    """The run of tlparse's corrupted trace in team_db (skipped where the public logs are absent)."""
    if not CORRUPTED_TRACE.exists():
        pytest.skip("../shared/public_logs/tlparse/ is absent")
    with open_store(team_db).read() as con:
        return con.execute("SELECT run_id FROM files WHERE original_name = ?", [CORRUPTED_TRACE.name]).fetchone()[0]


@pytest.fixture
def empty_db(tmp_path) -> Path:
    path = tmp_path / "empty" / "compilewatch.duckdb"
    open_store(path)
    return path


@pytest.fixture
def app_at(monkeypatch):
    """app_at(db_path, page=None, **query) -> an AppTest that has run the page once."""
    from streamlit.testing.v1 import AppTest

    def make(db: Path, page: str | None = None, query: dict | None = None, timeout: float = 60):
        monkeypatch.setenv("COMPILEWATCH_DB", str(db))
        monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "0")
        at = AppTest.from_file(MAIN, default_timeout=timeout)
        at.run()
        if page:
            at.query_params.clear()  # the sidebar navigation drops the query string too
            at.switch_page(page)
        for k, v in (query or {}).items():
            at.query_params[k] = v
        at.run()
        return at

    return make
