"""The store: migrations, locking between processes, versions, raw files."""
from __future__ import annotations

import hashlib
import multiprocessing as mp
import time
from pathlib import Path

import pytest

from compilewatch.core.errors import StoreError
from compilewatch.store import open_store
from compilewatch.store.embedded import EmbeddedStore
from compilewatch.store.files import migrations

REPO = Path(__file__).resolve().parents[2]


def test_migrations_apply_once_and_are_recorded(tmp_path):
    s = open_store(tmp_path / "a.duckdb")
    with s.read() as con:
        names = [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    assert names == [n for n, _ in migrations()]
    assert open_store(tmp_path / "a.duckdb").migrate() == []


def test_read_of_missing_database_names_the_fix(tmp_path):
    with pytest.raises(StoreError) as e:
        with EmbeddedStore(tmp_path / "none.duckdb").read():
            pass
    assert "compilewatch ingest" in e.value.hint


def test_data_version_changes_on_write(store):
    v0 = store.data_version()
    with store.write() as con:
        con.execute("INSERT INTO runs (run_id) VALUES ('r1')")
    assert store.data_version() != v0


def _writer(db, n, tag):
    s = EmbeddedStore(db)
    for i in range(n):
        with s.write() as con:
            con.execute("INSERT INTO runs (run_id, model) VALUES (?, ?)", [f"{tag}-{i}", tag])


def _reader(db, seconds, q):
    s = EmbeddedStore(db)
    seen, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with s.read() as con:
            seen = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    q.put(seen)


def test_concurrent_writers_and_a_reader_in_other_processes(store):
    # DuckDB refuses a second writing process outright; the flock in front must make them queue.
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(store.db_path, 15, t)) for t in ("a", "b", "c")]
    procs.append(ctx.Process(target=_reader, args=(store.db_path, 3.0, q)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert q.get(timeout=5) >= 0
    with store.read() as con:
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone() == (45, 45)


def test_keep_raw_is_content_addressed(store, tmp_path):
    f = tmp_path / "x.log"
    f.write_bytes(b"hello")
    sha, rel, size = store.keep_raw(f)
    assert sha == hashlib.sha256(b"hello").hexdigest() and size == 5
    assert (store.folder / rel).read_bytes() == b"hello" and sha in rel
    assert store.keep_raw(f) == (sha, rel, size)
    assert list(store.tmp_dir.iterdir()) == []


def _write_once(db, timeout, q):
    s = EmbeddedStore(db)
    try:
        with s.write(timeout=timeout) as con:
            con.execute("INSERT INTO runs (run_id) VALUES ('from-another-process')")
        q.put("stored")
    except StoreError as e:
        q.put(type(e).__name__)


def test_held_reads_share_one_connection_and_hold_writers_off_until_the_block_ends(store):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with store.reads_held():
        with store.read() as first:
            first.execute("SELECT count(*) FROM runs").fetchall()
        with store.read() as second:
            assert second is first     # no new open of the database per query
        # the shared lock is kept with the connection: another process's writer waits, then gives up
        p = ctx.Process(target=_write_once, args=(store.db_path, 0.5, q))
        p.start()
        p.join(60)
        assert q.get(timeout=5) == "StoreBusyError"
    p = ctx.Process(target=_write_once, args=(store.db_path, 10, q))
    p.start()
    p.join(60)
    assert q.get(timeout=5) == "stored"
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM runs WHERE run_id = 'from-another-process'").fetchone() == (1,)


def test_a_write_inside_held_reads_gives_the_connection_up_and_later_reads_see_it(store):
    with store.reads_held():
        with store.read() as before:
            assert before.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        with store.write() as con:   # would wait on its own shared lock if the read were still held
            con.execute("INSERT INTO runs (run_id) VALUES ('r1')")
        with store.read() as after:
            assert after is not before
            assert after.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_a_failed_query_inside_held_reads_drops_the_connection(store):
    import duckdb

    with store.reads_held():
        with pytest.raises(duckdb.Error):
            with store.read() as con:
                con.execute("SELECT * FROM no_such_table")
        with store.read() as fresh:
            assert fresh is not con
            assert fresh.execute("SELECT count(*) FROM runs").fetchone() == (0,)


_DIE_AFTER = """
import os, sys
import compilewatch.store.embedded as embedded
from compilewatch.store import open_store
real = embedded.after_migration
def after_migration(con, name):
    real(con, name)
    if name == sys.argv[2]:
        con.execute("INSERT INTO _migrations (name) VALUES (?)", [name])
        con.execute("COMMIT")
        os._exit(9)            # as kill -9 would: no close, no checkpoint
embedded.after_migration = after_migration
open_store(sys.argv[1])
"""


@pytest.mark.parametrize("last", ["002_run_metrics.sql", "004_uploaded_by.sql", "014_month_rollups.sql"])
def test_a_store_whose_creation_was_killed_after_a_migration_opens_and_is_complete(tmp_path, last):
    """Killed right after a migration that altered `runs` committed, before any checkpoint. The old
    way (migrations applied in place) left a write-ahead log DuckDB cannot replay, and the store could
    never be opened again, not even read-only."""
    import subprocess
    import sys
    db = tmp_path / "new" / "cw.duckdb"
    done = subprocess.run([sys.executable, "-c", _DIE_AFTER, str(db), last], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    assert not db.exists()                       # nothing half made under the store's name
    store = open_store(db)
    with store.read() as con:
        names = [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert names == [n for n, _ in migrations()]
    assert not list(db.parent.glob("*.creating*"))


def test_a_write_ahead_log_duckdb_cannot_replay_is_a_store_error_that_says_what_to_move(tmp_path):
    """A store left by a kill between an ALTER TABLE's commit and its checkpoint (how older versions
    migrated in place): a StoreError naming the log, not DuckDB's internal error."""
    import duckdb
    db = tmp_path / "old" / "cw.duckdb"
    db.parent.mkdir()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t (a INTEGER, made TIMESTAMP DEFAULT current_timestamp)")
    con.execute("CHECKPOINT")
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("ALTER TABLE t ADD COLUMN b INTEGER")
    con.close()
    assert db.with_name("cw.duckdb.wal").exists()
    with pytest.raises(StoreError) as e:
        with EmbeddedStore(db).read():
            pass
    assert "write-ahead log" in str(e.value) and "cw.duckdb.wal" in e.value.hint


def test_a_store_made_with_keys_on_runs_and_files_loses_them_and_keeps_its_rows(tmp_path, monkeypatch):
    """Migration 017 builds runs and files again without the keys they had: every row stays, in its
    order, files stored before are still duplicates, and new ones are stored once."""
    import duckdb

    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import embedded

    bundles = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
    every = migrations()
    # every migration but 017 itself: this version's refresh of derived facts reads tables later ones add
    monkeypatch.setattr(embedded, "migrations", lambda: [m for m in every if not m[0].startswith("017")])
    db = tmp_path / "cw.duckdb"
    assert ingest_paths(open_store(db), bundles[:2]).ok

    def table(name):
        con = duckdb.connect(str(db), read_only=True)
        try:
            keys = con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = ? AND "
                               "constraint_type IN ('PRIMARY KEY', 'UNIQUE')", [name]).fetchone()[0]
            return keys, con.execute(f"SELECT * FROM {name} ORDER BY rowid").fetchall()
        finally:
            con.close()

    (run_keys, runs), (file_keys, files) = table("runs"), table("files")
    assert run_keys == 1 and file_keys == 2 and len(runs) == 2 and len(files) == 10

    monkeypatch.setattr(embedded, "migrations", lambda: every)
    store = open_store(db)
    assert table("runs") == (0, runs) and table("files") == (0, files)
    again = ingest_paths(store, bundles)
    assert [f.status for f in again.files].count("duplicate") == 10
    assert [f.status for f in again.files].count("stored") == 5
    with store.read() as con:
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone() == (3, 3)
        assert con.execute("SELECT count(*), count(DISTINCT file_id), count(DISTINCT (run_id, sha256)) "
                           "FROM files").fetchone() == (15, 15, 15)
