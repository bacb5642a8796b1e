"""The Overview's kept review (app/overview_review.py), brought current by the writer right after
an ingest rather than by the next visitor: `compilewatch ingest`, `inbox` (the workers behind
`compilewatch push` and the dashboard) and the upload page call it once their runs are committed.

What is refreshed is the view every visitor lands on: the page's default window (a week ending on
the last day with runs), no filters, the team's rules from the settings. A review is recomputed whole
rather than per group of the new runs: a run on a new day moves the default window and so every
group's two sides, and the hotspots and storms beside the verdicts are a top ten over all groups.

A refresh never fails its ingest: its error is logged and the next visit computes the review, as it
did before. Writers do not fight over it: in a process, one refresh per store runs at a time and
one asked for meanwhile runs once after it (however many were asked for); across processes on one
host, a lock file lets one refresher in and the others leave it to that one; across hosts, a
refresher whose store moved on while it computed keeps nothing (store/review_cache.py: keep).
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pandas as pd

from compilewatch.app import overview_review
from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import data_bounds
from compilewatch.core import settings
from compilewatch.store import review_cache

log = logging.getLogger(__name__)

DEFAULT_DAYS = 7   # the Overview's window (app/views/overview.py: ui.page's default_days)
# Refreshes in a row while runs keep arriving during each; the next visit computes past that.
ROUNDS = 4

_running: dict[str, threading.Lock] = {}   # per store: the refresh under way in this process
_asked: dict[str, threading.Event] = {}    # per store: asked again while one ran
_guard = threading.Lock()


def default_view(con) -> Filters | None:
    """The Filters of the Overview a visitor lands on (ui.page with no URL and nothing remembered);
    None for a store without runs."""
    b = data_bounds(con).iloc[0]
    if not b["runs"] or pd.isna(b["last_day"]):
        return None
    last = pd.Timestamp(b["last_day"]).date()
    return Filters(start=last - timedelta(days=DEFAULT_DAYS - 1), end=last)


def enabled() -> bool:
    return settings.is_on("review_refresh")


def refresh(store) -> bool:
    """Bring the default view's kept review current with the store's version, unless another
    refresher of this store is at it (which then also covers what was asked here). True when the
    review is kept for the version the store had at the end. Never raises: a failure is logged and
    left to the next visit."""
    key = _store_key(store)
    with _guard:
        running = _running.setdefault(key, threading.Lock())
        asked = _asked.setdefault(key, threading.Event())
    asked.set()
    kept = False
    # Asked again by another thread while this one ran: run once more after it, never alongside
    # it. The thread that finds the lock taken leaves; the one holding it looks at `asked` once
    # it has let go, so a request made at any moment is served by one run that starts after it.
    while asked.is_set() and running.acquire(blocking=False):
        try:
            asked.clear()
            kept = _refresh_once(store, key)
        finally:
            running.release()
    return kept


def refresh_in_background(store) -> threading.Thread | None:
    """refresh() in a daemon thread, for a process that goes on serving (the upload page, an inbox
    worker); None when refreshing is turned off."""
    if not enabled():
        return None
    t = threading.Thread(target=refresh, args=(store,), name="compilewatch-review-refresh", daemon=True)
    t.start()
    return t


def refresh_detached(store) -> subprocess.Popen | None:
    """refresh() in a process of its own that outlives the caller, for a command that ends after
    its ingest (`compilewatch ingest`, `inbox` without --watch): the command's time, memory and exit
    status stay the ingest's, and whatever waits on its output (a CI step's pipe) is not held open.
    None when refreshing is turned off. The process's log is _log_path(store)."""
    if not enabled():
        return None
    env = {**os.environ, "COMPILEWATCH_DB": os.fspath(store.db_path)}
    if getattr(store, "backend", "") == "ducklake":
        env["COMPILEWATCH_DATA_PATH"] = os.fspath(store.folder)
    with open(_log_path(store), "ab") as log_file:
        return subprocess.Popen([sys.executable, "-m", "compilewatch.app.review_refresh"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log_file,
                                start_new_session=True, close_fds=True)


def _refresh_once(store, key: str) -> bool:
    try:
        for _ in range(ROUNDS):
            with _host_lock(key) as mine:
                if mine and (f := _unkept(store)) is not None:
                    overview_review.overview(store, f)
            # Looked at once the lock is let go: a refresher in another process that found it held
            # left its runs' version to this one. One that did not hold it leaves the rest to the
            # holder, which looks after it lets go (after that refresher's runs were committed).
            f = _unkept(store)
            if f is None or not mine:
                return f is None
        return False
    except Exception:   # a refresh never fails the ingest before it; the next visit computes
        log.exception("keeping the Overview's review current failed; the next visit computes it")
        return False


def _unkept(store) -> Filters | None:
    """The default view when its review is not kept for the store's current version; None when it
    is (or the store holds no runs, which the Overview shows no review for)."""
    with store.read() as con:
        f = default_view(con)
        if f is None or review_cache.is_kept(con, overview_review.view_key(f), review_cache.store_version(con)):
            return None
        return f


@contextmanager
def _host_lock(key: str):
    """An flock for this store's refresher on this host, not waited for: yields False when another
    process holds it."""
    path = Path(tempfile.gettempdir()) / f"compilewatch-review-{key}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _log_path(store) -> Path:
    return Path(tempfile.gettempdir()) / f"compilewatch-review-{_store_key(store)}.log"


def _store_key(store) -> str:
    where = str(Path(store.db_path).resolve()) if not str(store.db_path).startswith("ducklake:") else str(store.db_path)
    return hashlib.sha256(where.encode()).hexdigest()[:24]


if __name__ == "__main__":   # refresh_detached's process: the store from COMPILEWATCH_DB / _DATA_PATH
    from compilewatch.store import open_store

    logging.basicConfig(format="%(asctime)s compilewatch review refresh: %(message)s", level=logging.INFO)
    # the db named explicitly: open_store() alone reads a ducklake: spec as a file's name
    sys.exit(0 if refresh(open_store(settings.get("db"), settings.get("data_path") or None)) else 1)
