"""Derived facts on the DuckLake team store: a run is refreshed once for the files a process writes
in a row, not once per file (store/lake.py), and a refresh that did not happen is made up by the
next process that writes or by `maintain`. Real bundles and logs against a real PostgreSQL."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import derived, lake, open_store

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))[:2]
# what store/derived.py fills per run, and the markers of runs whose facts lag
DERIVED = ("run_metrics", "rollup_graph_breaks", "rollup_recompiles", "rollup_guard_failures",
           "rollup_run_totals", "rollup_steps", "rollup_day_runs", "rollup_month_graph_breaks")


def _counts(store, tables=DERIVED + ("stale_runs",)) -> dict:
    with store.read() as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables}


@pytest.fixture
def refreshes(monkeypatch):
    """The runs of each refresh the lake's held writes run (store/derived.refresh_runs calls)."""
    calls: list[list[str]] = []
    real = derived.refresh_runs

    def counted(con, run_ids):
        calls.append(list(run_ids))
        return real(con, run_ids)
    monkeypatch.setattr(derived, "refresh_runs", counted)
    return calls


def test_bundles_written_in_a_row_are_refreshed_once(lake_store, tmp_path, refreshes, monkeypatch):
    monkeypatch.setattr(lake, "REFRESH_AFTER_S", 3600.0)   # however slow this machine is today
    report = ingest_paths(lake_store, BUNDLES)
    assert report.ok and sum(f.status == "stored" for f in report.files) >= 8
    # two bundles of four or more files each, written in a row: one refresh, of both runs
    assert len(refreshes) == 1 and len(refreshes[0]) == 2, refreshes
    # the same facts as the embedded store's (test_lake.py compares every table, row for row)
    emb = open_store(tmp_path / "emb" / "cw.duckdb")
    assert ingest_paths(emb, BUNDLES).ok
    got = _counts(lake_store)
    assert got == _counts(emb) and got["stale_runs"] == 0 and got["rollup_day_runs"] == 2, got


def test_a_long_ingest_refreshes_between_runs_not_between_files(lake_store, refreshes, monkeypatch):
    """Marks older than REFRESH_AFTER_S are refreshed before the next run's first file, so another
    host's reader does not wait for the end of a long folder ingest; never between two files of one
    run, which under contention for the write lock would be every file again."""
    monkeypatch.setattr(lake, "REFRESH_AFTER_S", 0.0)
    report = ingest_paths(lake_store, BUNDLES)
    assert report.ok and sum(f.status == "stored" for f in report.files) >= 8
    assert [len(r) for r in refreshes] == [1, 1], refreshes
    assert refreshes[0] != refreshes[1] and _counts(lake_store)["stale_runs"] == 0


def test_writes_outside_a_hold_refresh_in_their_own_transaction(lake_store, refreshes):
    with lake_store.claim_file("0" * 64, "run-outside", False) as claim:
        assert not claim.refresh_later
    with lake_store.writes_held(), lake_store.claim_file("1" * 64, "run-inside", False) as claim:
        assert claim.refresh_later


def test_a_failed_refresh_is_made_up_by_the_next_write_and_by_maintain(lake_store, monkeypatch, caplog):
    real = lake.refresh_stale

    def down(con):
        raise duckdb.IOException("the catalog went away mid-refresh")
    monkeypatch.setattr(lake, "refresh_stale", down)
    assert ingest_paths(lake_store, [TRACE]).ok          # the rows are stored all the same ...
    lagging = _counts(lake_store)
    assert lagging["stale_runs"] >= 1 and lagging["rollup_run_totals"] == 0, lagging
    assert "not refreshed" in caplog.text                 # ... and the log says what lags
    monkeypatch.setattr(lake, "refresh_stale", real)
    assert ingest_paths(lake_store, [TEXTS[0]]).ok       # the next write refreshes every marked run
    after = _counts(lake_store)
    assert after["stale_runs"] == 0 and after["rollup_run_totals"] == 2, after

    monkeypatch.setattr(lake, "refresh_stale", down)
    assert ingest_paths(lake_store, [TEXTS[1]]).ok
    assert _counts(lake_store)["rollup_run_totals"] == 2
    monkeypatch.setattr(lake, "refresh_stale", real)
    done = lake_store.maintain(expire_older_than_days=7.0)
    assert "refresh runs marked stale" in done.steps
    final = _counts(lake_store)
    assert final["stale_runs"] == 0 and final["rollup_run_totals"] == 3, final
