"""The dashboard on a DuckLake team store (a real PostgreSQL from tests/conftest.py): every page
renders; PostgreSQL stopped while the dashboard is open gives a clear message, not a traceback, and
the pages work again once it is back, without restarting the dashboard."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_pages import PAGES, _ok

from compilewatch.ingest.loader import ingest_paths

from rendered import shown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def lake_filled(postgres, tmp_path_factory):
    """One DuckLake store with the real fixture logs, shared by this module's tests (ingest is the slow part)."""
    from compilewatch.store import open_store
    postgres.create_database("app_pages", fresh=True)
    store = open_store(postgres.lake_spec("app_pages"), tmp_path_factory.mktemp("lake-app"))
    logs = sorted((FIXTURES / "trace").glob("*.log.gz")) + sorted((FIXTURES / "text").glob("torch2.13_*.log"))
    assert ingest_paths(store, logs).ok
    yield store
    store.close()


@pytest.fixture
def lake_app(lake_filled, monkeypatch):
    monkeypatch.setenv("COMPILEWATCH_DATA_PATH", str(lake_filled.folder))
    return lake_filled


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders_on_ducklake(app_at, lake_app, name):
    at = app_at(lake_app.spec, PAGES[name], query={"from": "2000-01-01", "to": "2100-01-01"})
    _ok(at)


def test_postgres_stopped_while_open_then_back(app_at, lake_app, postgres):
    at = app_at(lake_app.spec, PAGES["overview"], query={"from": "2000-01-01", "to": "2100-01-01"})
    _ok(at)
    runs = [m.value for m in at.metric if m.label == "Runs"]
    assert runs and str(runs[0]) != "0"
    postgres.stop("fast")
    try:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        errors = " ".join(shown(e.value) for e in at.error)
        assert "cannot reach the team store's PostgreSQL at 127.0.0.1" in errors, errors
    finally:
        postgres.start(postgres.port)
    at.run()
    _ok(at)
    assert [m.value for m in at.metric if m.label == "Runs"] == runs
