"""Several processes ingesting at once (CLI runs, dashboard uploads, inbox workers): every file is
stored exactly once, and the same file raced by several of them is stored once, not N times."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))


def test_racing_ingests_store_each_file_once(tmp_path):
    db = tmp_path / "store" / "cw.duckdb"
    files = [TRACE, *TEXTS]
    procs = [subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", "--quiet", "--db", str(db), *map(str, files)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    expected = json.loads(subprocess.run([sys.executable, "-m", "compilewatch", "summarize", "--json", *map(str, files)],
                                         cwd=REPO, capture_output=True, text=True, check=True).stdout)
    con = duckdb.connect(str(db), read_only=True)
    try:
        n_files, n_distinct = con.execute("SELECT count(*), count(DISTINCT sha256) FROM files").fetchall()[0]
        breaks = con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0]
        recompiles = con.execute("SELECT count(*) FROM recompiles").fetchall()[0][0]
    finally:
        con.close()
    assert n_files == n_distinct == len(files)
    assert breaks == expected["graph_breaks"] and recompiles == expected["recompiles"]
    # each file was stored by exactly one racer; the two others were told it is a duplicate
    totals = [re.search(r"^(\d+) stored, (\d+) duplicate, (\d+) failed", o[0], re.M).groups() for o in outs]
    assert sum(int(t[0]) for t in totals) == len(files)
    assert sum(int(t[1]) for t in totals) == 2 * len(files)
    assert all(t[2] == "0" for t in totals)


def test_readers_get_in_while_a_folder_ingest_keeps_its_writer(tmp_path):
    """A folder ingest keeps one writer connection, and the writer lock, from one file to the next
    (EmbeddedStore.writes_held), but lets it go every HOLD_SECONDS while another process waits: a
    reader in another process waits about that long, never for the whole ingest, and sees the files
    stored so far."""
    from compilewatch.store.embedded import EmbeddedStore

    db = tmp_path / "store" / "cw.duckdb"
    # The ingest runs with a hold far shorter than the default, so that its writes span many holds
    # however fast this machine ingests the folders: its 88 files are written in 2-3 s, of which a
    # held writer's commits are under one. At 0.5 s, one run let a reader in between files only
    # once (the assertion below needs two); at 0.15 s readers got in 8-11 times in each of three runs.
    hold = 0.15
    run_with_hold = ("import sys, compilewatch.store.embedded as e; e.HOLD_SECONDS = float(sys.argv.pop(1)); "
                     "from compilewatch.cli import main; sys.exit(main())")
    folders = [REPO / "sample_logs" / name for name in ("cpu-torch2.13", "cpu-torch2.13-versions", "cpu-torch2.14.1")]
    EmbeddedStore.open(db)   # created before the race: only the ingest's writes are timed
    # its output goes to a file: the table of ~110 files outgrows a pipe's buffer, and a pipe read
    # only at the end would stop the ingest mid-table
    log = open(tmp_path / "ingest.log", "w+")
    proc = subprocess.Popen([sys.executable, "-c", run_with_hold, str(hold), "ingest", "--quiet", "--workers", "1",
                             "--db", str(db), *map(str, folders)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                            text=True)
    store = EmbeddedStore(db)
    seen, waits = [], []
    try:
        while proc.poll() is None:
            t0 = time.monotonic()
            with store.read(timeout=hold + 60) as con:
                waits.append(time.monotonic() - t0)
                seen.append(con.execute("SELECT count(*) FROM files").fetchall()[0][0])
                # the writer refreshes the runs it marked before it lets go (store/derived.py)
                assert con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0] == 0
            time.sleep(0.05)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.seek(0)
        err = log.read()
        log.close()
    assert proc.returncode == 0, err
    with store.read() as con:
        total = con.execute("SELECT count(*) FROM files").fetchall()[0][0]
    assert total > 10
    # readers got in between files, not only before and after the whole ingest (a writer that takes
    # the lock straight back after its pause starves them: flock has no queue)
    assert len({n for n in seen if 0 < n < total}) >= 2, seen
    assert seen == sorted(seen)
    # a wait is one hold plus the write under way (a few seconds on a loaded CI machine), far below the
    # ingest's own length
    assert max(waits) < hold + 10, waits


def test_a_writer_nobody_waits_for_keeps_its_lock_to_the_end(tmp_path, monkeypatch):
    """Letting the lock go costs the refresh of the marked runs and a checkpoint at close: a held
    writer lets go after HOLD_SECONDS only when another process has said it waits (<db>.waiting,
    which the reader test above relies on), so with nobody waiting it lets go once, at the end, and
    refreshes every run in that one pass."""
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import derived, embedded, open_store

    monkeypatch.setattr(embedded, "HOLD_SECONDS", 0.0)   # any write would let go, were anyone waiting
    monkeypatch.setattr(embedded, "MAX_HOLD_SECONDS", 600.0)
    releases, passes = [], []
    real_release, real_refresh = embedded.EmbeddedStore.release_writes, derived.refresh_runs

    def counted_release(self, refresh=True):
        releases.append(self._writer is not None)
        real_release(self, refresh)

    monkeypatch.setattr(embedded.EmbeddedStore, "release_writes", counted_release)
    monkeypatch.setattr(derived, "refresh_runs", lambda con, ids: (passes.append(list(ids)), real_refresh(con, ids)))
    store = open_store(tmp_path / "cw.duckdb")
    report = ingest_paths(store, [REPO / "sample_logs" / "cpu-torch2.13-versions"])
    runs = {f.run_id for f in report.files if f.status == "stored"}
    assert report.ok and len(runs) > 3 and len(report.files) > 10
    assert releases.count(True) == 1, releases                    # let go once, at the end
    assert len(passes) == 1 and sorted(passes[0]) == sorted(runs), passes
    assert not store.waiting_path.exists()                        # nobody waited


def test_a_copy_in_the_same_folder_is_found_while_the_writer_is_held(tmp_path):
    """The duplicate lookup runs in a thread of its own beside the parse; while this process holds the
    writer lock across files, it reads through the held connection instead of waiting for a shared
    lock that our own writer holds (a lock timeout of 5 s would fail the ingest)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("a.log", "b.log", "c.log"):
        (folder / name).write_bytes(TEXTS[0].read_bytes())
    (folder / "other.log").write_bytes(TEXTS[1].read_bytes())
    db = tmp_path / "store" / "cw.duckdb"
    env = {**os.environ, "COMPILEWATCH_LOCK_TIMEOUT": "5"}
    p = subprocess.run([sys.executable, "-m", "compilewatch", "ingest", "--quiet", "--workers", "1", "--db", str(db),
                        str(folder)], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^2 stored, 2 duplicate, 0 failed", p.stdout, re.M), p.stdout


def test_a_read_waiting_for_the_lock_goes_through_the_writer_this_process_took_meanwhile(tmp_path):
    """Eight dashboard uploads share one held writer. A thread of that process that began to wait
    for the shared lock just before another thread took the held writer must read through it: the
    writer's block keeps the lock until it ends, and an upload's block waits for its own hashing
    thread's read (one upload failed with a lock timeout that way). Here: another process's lock
    (a flock on the store's lock file) keeps both threads waiting, the reader first; it is let go
    while the writer polls faster, so the writer usually wins. Each trial's read must succeed well
    within its 3 s timeout, and the writer must have won in at least one trial."""
    import fcntl
    import threading

    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import open_store

    store = open_store(tmp_path / "store" / "cw.duckdb")
    ingest_paths(store, [sorted((REPO / "sample_logs").rglob("*.tar.gz"))[0]])
    outcomes = []
    for _ in range(8):
        fd = os.open(store.lock_path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        read_done = threading.Event()
        got: dict = {}

        def reader():
            try:
                with store.read(timeout=3) as con:
                    got["via_writer"] = store._writer is not None
                    got["runs"] = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
            except Exception as e:   # the outcome under test
                got["error"] = e
            finally:
                read_done.set()

        def writer():
            with store.writes_held():
                with store.write(timeout=30) as con:
                    con.execute("SELECT count(*) FROM files").fetchall()
                read_done.wait(10)   # an ingest's next file waits for its hashing thread's lookup

        r, w = threading.Thread(target=reader), threading.Thread(target=writer)
        r.start()
        time.sleep(0.3)    # the reader now polls every LOCK_POLL_S
        w.start()
        time.sleep(0.01)   # the writer's first polls are a few ms apart
        os.close(fd)
        r.join(30)
        w.join(30)
        assert "error" not in got, got
        outcomes.append(got["via_writer"])
        assert got["runs"] == 1
    assert any(outcomes), outcomes
    assert store._writer is None   # the block let it go
