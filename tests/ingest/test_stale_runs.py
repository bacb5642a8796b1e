"""A writer that keeps its connection across files refreshes each run's derived facts once, before
it lets the lock go, instead of in every file's transaction (store/derived.py mark_stale,
refresh_stale): the same facts, a fifth of the refreshes for a bundle of five files, and a marker
that makes the next open refresh what a killed writer owed."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from compilewatch.ingest import commit, loader
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import derived, open_store
from compilewatch.store.embedded import EmbeddedStore
from tests.ingest.test_rollups import assert_rollups_match

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
DERIVED = ("run_metrics", "rollup_run_totals", "rollup_compile_time", "rollup_day_runs", "rollup_steps")


def _rows(store, table: str) -> list:
    with store.read() as con:
        return sorted(map(repr, con.execute(f"SELECT * FROM {table}").fetchall()))


def _derived_runs(store) -> set[str]:
    with store.read() as con:
        return {r for (r,) in con.execute("SELECT run_id FROM rollup_run_totals").fetchall()}


def test_a_bundle_is_refreshed_once_per_run_not_once_per_file(tmp_path, monkeypatch):
    passes = []
    real = derived.refresh_runs
    counted = lambda con, run_ids: (passes.append(list(run_ids)), real(con, run_ids))  # noqa: E731
    monkeypatch.setattr(derived, "refresh_runs", counted)   # refresh_stale's and a file's own transaction's
    store = open_store(tmp_path / "cw.duckdb")
    report = ingest_paths(store, BUNDLES)
    stored = [f for f in report.files if f.status == "stored"]
    runs = {f.run_id for f in stored}
    refreshed = [r for run_ids in passes for r in run_ids]
    assert len(runs) == len(BUNDLES) and len(stored) >= 4 * len(runs)
    # every run refreshed, each about once (a hold that ends between two files of a run refreshes it
    # again at the next release), and far fewer times than files were stored
    assert set(refreshed) == runs and len(refreshed) < len(stored) / 2, (len(refreshed), len(stored))
    # each pass refreshes every run the hold marked, each once
    assert all(len(set(run_ids)) == len(run_ids) for run_ids in passes), passes
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
    assert _derived_runs(store) == runs
    assert_rollups_match(store)
    # the same facts as every run refreshed from scratch, one at a time
    before = {t: _rows(store, t) for t in ("run_metrics", "rollup_day_runs")}
    with store.write() as con:
        con.execute("BEGIN")
        for run_id in runs:
            real(con, [run_id])
        con.execute("COMMIT")
    assert {t: _rows(store, t) for t in before} == before


def test_one_pass_over_many_runs_gives_what_a_pass_per_run_gives(tmp_path):
    """refresh_runs over several runs at once (one statement per table), against one run at a
    time, on every derived table: runs that share day and month cells, and runs that do not."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, BUNDLES).ok
    with store.read() as con:
        runs = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'rollup_%' OR table_name = 'run_metrics'"
        ).fetchall()]
    assert len(runs) == len(BUNDLES) and len(tables) > 10

    def derived_rows():   # sums of seconds may differ in the last bit with the order they are summed in
        with store.read() as con:
            return {t: sorted(repr(tuple(round(v, 6) if isinstance(v, float) else v for v in row))
                              for row in con.execute(f"SELECT * FROM {t}").fetchall())
                    for t in (*tables, "runs")}

    with store.write() as con:
        con.execute("BEGIN")
        for run_id in runs:
            derived.refresh_runs(con, [run_id])
        con.execute("COMMIT")
    one_at_a_time = derived_rows()
    with store.write() as con:
        con.execute("BEGIN")
        derived.refresh_runs(con, runs)
        con.execute("COMMIT")
    assert_rollups_match(store)
    together = derived_rows()
    for table in one_at_a_time:
        assert together[table] == one_at_a_time[table], table


KILLED_WRITER = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import open_store
    store = open_store(sys.argv[1])
    with store.writes_held():   # the hold outlives the ingest: its files are committed, the refresh owed
        report = ingest_paths(store, [Path(p) for p in sys.argv[2:]])
        assert report.ok, report
        os._exit(0)             # killed before the writer lets go
""")


def test_the_runs_a_killed_writer_owed_are_refreshed_at_the_next_open(tmp_path):
    db = tmp_path / "cw.duckdb"
    p = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db), *map(str, BUNDLES)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    store = EmbeddedStore(db)
    with store.read() as con:
        marked = {r for (r,) in con.execute("SELECT run_id FROM stale_runs").fetchall()}
        stored = {r for (r,) in con.execute("SELECT DISTINCT run_id FROM files").fetchall()}
    assert marked == stored and len(stored) == len(BUNDLES)
    assert not _derived_runs(store) & marked   # the rows are stored, their facts lag

    store = open_store(db)   # what any command or the dashboard does first
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
    assert _derived_runs(store) == stored
    assert_rollups_match(store)
    # the same facts as a writer that was not killed
    clean = open_store(tmp_path / "clean" / "cw.duckdb")
    assert ingest_paths(clean, BUNDLES).ok
    for table in DERIVED:
        assert len(_rows(store, table)) == len(_rows(clean, table)), table
    assert _rows(store, "run_metrics") == _rows(clean, "run_metrics")


def test_a_page_render_beside_a_held_writer_sees_its_runs_refreshed(tmp_path, monkeypatch):
    """The dashboard's uploads write through a held writer, and its page renders (reads_held) read
    through that same connection: a render refreshes the marked runs first, so a page never shows a
    run whose facts lag its rows. An ingest's own lookups (no reads_held) leave the markers for the
    one refresh at release."""
    from compilewatch.store import embedded

    monkeypatch.setattr(embedded, "HOLD_SECONDS", 600.0)   # the hold outlasts the ingest on a slow machine
    store = open_store(tmp_path / "cw.duckdb")
    with store.writes_held():
        report = ingest_paths(store, BUNDLES[:1])
        assert [r.status for r in report.files].count("stored") == len(report.files)
        assert store._writer is not None
        with store.read() as con:
            marked = con.execute("SELECT count(DISTINCT run_id) FROM stale_runs").fetchall()[0][0]
            assert marked == 1
            assert con.execute("SELECT count(*) FROM run_metrics").fetchall()[0][0] == 0
        version = store.data_version()
        with store.reads_held():
            with store.read() as con:
                assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
                assert con.execute("SELECT count(DISTINCT run_id) FROM run_metrics").fetchall()[0][0] == 1
        assert store.data_version() != version   # the page caches keyed on it see the change
    assert _derived_runs(store) == {report.files[0].run_id}
    assert_rollups_match(store)


def test_reingest_keeps_one_writer_and_refreshes_each_run_once(tmp_path, monkeypatch):
    """`compilewatch reingest --all` writes every stored file's rows again on the held writer, as a
    folder ingest does: each run's derived facts are refreshed once when the writer lets go, not in
    each file's transaction, and come out as they were."""
    from compilewatch.ingest.reingest import reingest

    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, BUNDLES).ok
    tables = ("run_metrics", "rollup_run_totals", "rollup_graph_breaks", "rollup_day_runs", "rollup_steps")
    before = {t: _rows(store, t) for t in tables}
    passes = []
    real = derived.refresh_runs
    monkeypatch.setattr(derived, "refresh_runs", lambda con, ids: (passes.append(list(ids)), real(con, ids)))
    n = reingest(store, all_files=True)
    refreshed = [r for run_ids in passes for r in run_ids]
    assert n >= 4 * len(BUNDLES)
    assert sorted(refreshed) == sorted(set(refreshed)) and len(set(refreshed)) == len(BUNDLES), passes
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
    assert_rollups_match(store)
    assert {t: _rows(store, t) for t in ("run_metrics", "rollup_day_runs")} == \
        {t: before[t] for t in ("run_metrics", "rollup_day_runs")}
    assert all(len(_rows(store, t)) == len(before[t]) for t in tables)



def test_a_held_writer_writes_a_runs_row_and_marker_once_for_files_that_agree(tmp_path, monkeypatch):
    """A bundle's files carry the same run fields: on one held writer the first file writes the
    runs row and the stale marker, the others leave both as they are. A write of anything else in
    between (here the run's label cleared by hand) makes the next file write them again, filling
    the gap as every file did before."""
    upserts, marks, stored, labels = [], [], [], []
    real_upsert, real_mark, real_store = commit._upsert_run, commit.mark_stale, loader.store_file
    monkeypatch.setattr(commit, "_upsert_run", lambda con, run_id, *a: (upserts.append(run_id),
                                                                         real_upsert(con, run_id, *a)))
    monkeypatch.setattr(commit, "mark_stale", lambda con, run_id: (marks.append(run_id), real_mark(con, run_id)))
    store = open_store(tmp_path / "cw.duckdb")

    def store_file(store, sink, row, run=None):
        found = real_store(store, sink, row, run)
        stored.append(row.run_id)
        if len(stored) == 2:   # between the second and third file, on the held writer
            with store.write() as con:
                labels.extend(con.execute("SELECT label FROM runs WHERE run_id = ?", [row.run_id]).fetchall())
                con.execute("UPDATE runs SET label = NULL WHERE run_id = ?", [row.run_id]).fetchall()
        return found

    monkeypatch.setattr(loader, "store_file", store_file)
    report = ingest_paths(store, BUNDLES[:1])
    assert report.ok and len(stored) >= 4 and len(set(stored)) == 1
    run_id = stored[0]
    assert upserts == [run_id] * 2 and marks == [run_id] * 2
    with store.read() as con:
        assert labels[0][0] and con.execute("SELECT label FROM runs WHERE run_id = ?", [run_id]).fetchall() == labels
        assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
    assert _derived_runs(store) == {run_id}
    assert_rollups_match(store)
