"""Long-running commands stop when told, however they were started: each test starts the command as
a non-interactive script's `cmd &` does, with SIGINT ignored (Python then never raises
KeyboardInterrupt on its own), and stops it with SIGINT or SIGTERM idle, mid-ingest, waiting for the
store's lock and waiting on PostgreSQL. Nothing is lost: the entry a worker held goes back to the
inbox (or is recovered as a dead worker's claim) and is stored once by the next pass. The dashboard's
own stop: tests/app/test_dashboard_stop.py."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilewatch.ingest.inbox import process_once
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
BIG_BUNDLE = max((REPO / "sample_logs" / "gpu-h200-torch2.11").glob("*.tar.gz"), key=lambda p: p.stat().st_size)
SMALL_BUNDLE = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[0]
STOPPED_WITHIN_S = 20   # the commands' own grace is 10 s; the rest is this shared machine's load

pytestmark = pytest.mark.timeout(600)


def _ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(args, env) -> subprocess.Popen:
    """`compilewatch ARGS &` from a script: SIGINT ignored, a process group of its own."""
    return subprocess.Popen([sys.executable, "-m", "compilewatch", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=_ignoring_sigint,
                            start_new_session=True)


def _stopped(proc: subprocess.Popen, sig) -> str:
    proc.send_signal(sig)
    t0 = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=STOPPED_WITHIN_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"still running {STOPPED_WITHIN_S} s after {signal.Signals(sig).name}: {proc.communicate()[0]}")
    assert time.monotonic() - t0 < STOPPED_WITHIN_S
    return out


def _drop(inbox: Path, bundle: Path) -> str:
    inbox.mkdir(parents=True, exist_ok=True)
    shutil.copy(bundle, inbox / f".{bundle.name}")
    (inbox / f".{bundle.name}").rename(inbox / bundle.name)
    return bundle.name


def _claimed(inbox: Path, name: str, proc, timeout=120) -> None:
    deadline = time.monotonic() + timeout
    while not list((inbox / ".work").glob(f"*/{name}")):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the worker never claimed the entry"
        time.sleep(0.02)


def _watching(proc) -> None:
    line = proc.stdout.readline()
    assert line.startswith("watching"), line + proc.communicate()[0]


def _env(store) -> dict:
    env = {**os.environ, "COMPILEWATCH_DB": str(getattr(store, "spec", store.db_path))}
    if store.backend == "ducklake":
        env["COMPILEWATCH_DATA_PATH"] = str(store.folder)
    return env


def _runs(store) -> list[tuple[str, bool]]:
    with store.read() as con:
        return [(r, n == d) for r, n, d in con.execute(
            "SELECT run_id, count(*), count(DISTINCT sha256) FROM files GROUP BY run_id ORDER BY 1").fetchall()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_inbox_watch_stops_when_idle(store, sig):
    proc = _start(["inbox", "--watch", "--interval", "30"], _env(store))
    _watching(proc)
    out = _stopped(proc, sig)
    assert proc.returncode == 0 and f"stopped ({signal.Signals(sig).name})" in out


def test_inbox_watch_stopped_mid_ingest_puts_its_entry_back(store):
    """Stopped while it ingests a bundle of many files: the file in progress is rolled back, the
    entry goes back into the inbox, and the next pass stores the rest: the run once, each file once."""
    name = _drop(store.inbox_dir, BIG_BUNDLE)
    proc = _start(["inbox", "--watch", "--interval", "0.2"], _env(store))
    _watching(proc)
    _claimed(store.inbox_dir, name, proc)
    time.sleep(0.3)                                          # into its files
    out = _stopped(proc, signal.SIGTERM)
    assert "stopped (SIGTERM)" in out and not list((store.inbox_dir / ".work").glob(f"*/{name}"))
    assert (store.inbox_dir / name).exists(), "the entry did not go back into the inbox"
    assert not (store.inbox_dir / "done").exists(), "the ingest ended before the signal"
    [(entry, report)] = process_once(store)
    assert entry == name and report.ok
    assert [ok for _, ok in _runs(store)] == [True]


def test_inbox_watch_stopped_while_waiting_for_the_store_lock(store):
    """Stopped while its ingest waits for the embedded store's writer lock, which another process
    holds: it stops within seconds, stores nothing, and gives the entry back."""
    proc = _start(["inbox", "--watch", "--interval", "0.2"], _env(store))
    _watching(proc)
    with store.write():                                       # another writer, for as long as it likes
        name = _drop(store.inbox_dir, SMALL_BUNDLE)
        _claimed(store.inbox_dir, name, proc)
        time.sleep(1.0)                                       # parsed, now waiting for the lock
        out = _stopped(proc, signal.SIGINT)
    assert "stopped (SIGINT)" in out and (store.inbox_dir / name).exists()
    assert _runs(store) == []
    [(entry, report)] = process_once(store)
    assert entry == name and report.ok and [ok for _, ok in _runs(store)] == [True]


def test_inbox_watch_stopped_while_waiting_on_postgresql(lake_store):
    """On the DuckLake store a worker waiting for the write turn waits inside PostgreSQL, where no
    Python handler runs: it still ends within seconds of the signal (its grace), PostgreSQL rolls
    its transaction back, and the next pass recovers its claim and stores the run once."""
    lake_store.inbox_dir.mkdir(parents=True, exist_ok=True)
    proc = _start(["inbox", "--watch", "--interval", "0.2"], _env(lake_store))
    _watching(proc)
    with lake_store._write_lock():                            # the write turn, held by this process
        name = _drop(lake_store.inbox_dir, SMALL_BUNDLE)
        _claimed(lake_store.inbox_dir, name, proc)
        time.sleep(2.0)                                       # parsed, now waiting for the turn
        _stopped(proc, signal.SIGINT)
    assert _runs(lake_store) == []
    [(entry, report)] = process_once(lake_store)             # the dead worker's claim, recovered
    assert entry == name and report.ok and [ok for _, ok in _runs(lake_store)] == [True]
