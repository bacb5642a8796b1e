"""Fixtures for dashboard tests: a store filled by the fixture builder, an empty store, and an
AppTest factory pointed at either through COMPILEWATCH_DB (sample_logs bootstrap switched off)."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.store import open_store

import fixture_db

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


@pytest.fixture(scope="session")
def team_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("team") / "compilewatch.duckdb"
    fixture_db.build(open_store(path))
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
