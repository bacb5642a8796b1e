"""A DuckLake commit that loses its race with another host's (a real PostgreSQL from
tests/conftest.py) is written again, once, and the ingest's report counts it: the file's `retries`,
which `compilewatch ingest` prints in its result table."""
from __future__ import annotations

from pathlib import Path

from compilewatch.ingest import commit
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store.lake import LakeStore

BUNDLE = sorted((Path(__file__).resolve().parents[2] / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[0]


def test_a_commit_that_lost_its_race_is_written_again_and_counted(lake_store, monkeypatch):
    # another host: a DuckDB instance of its own on the same catalog and data path
    other = LakeStore(lake_store.spec, lake_store.folder)
    real_write, written = commit._write, []

    def write_then_lose_the_race(con, sink, f, *args, **kwargs):
        real_write(con, sink, f, *args, **kwargs)
        written.append(f.original_name)
        if len(written) == 2:
            # the second file of the bundle updates its run's row (it fills gaps); the other host
            # commits an update of the same row first, so this transaction's commit conflicts
            with other.write() as c:
                c.execute("BEGIN")
                c.execute("UPDATE runs SET label = label WHERE run_id = ?", [f.run_id]).fetchall()
                c.execute("COMMIT")

    monkeypatch.setattr(commit, "_write", write_then_lose_the_race)
    try:
        report = ingest_paths(lake_store, [BUNDLE], workers=1)
    finally:
        other.close()
    assert report.ok, [(f.name, f.message) for f in report.files]
    assert [f.retries for f in report.files] == [0, 1] + [0] * (len(report.files) - 2)
    assert report.retries == 1
    assert written[1] == written[2]            # that file was written a second time
    with lake_store.read() as con:
        n, distinct = con.execute("SELECT count(*), count(DISTINCT sha256) FROM files").fetchall()[0]
        runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    assert n == distinct == len(report.files) and runs == 1
