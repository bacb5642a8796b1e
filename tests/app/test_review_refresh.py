"""The Overview's kept review brought current by the writers (app/review_refresh.py) on real bundles
(sample_logs/): after `compilewatch ingest` and an `inbox --watch` worker the default view's review
is kept for the store's new version, so the Overview reads it and computes nothing; a refresh that
fails leaves the ingest whole; refreshers at once compute it once; an older review never replaces a
newer one."""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from compilewatch.app import overview_review, review_refresh
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, review_cache

REPO = Path(__file__).resolve().parents[2]
FIRST = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
LATER = sorted((REPO / "sample_logs" / "cpu-torch2.14.1").glob("*.tar.gz"))
WAIT_S = 180   # the detached refresher's start and review on a loaded machine; it ends as soon as kept


def _cw(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "compilewatch", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})}, **kw)


def _kept_now(store) -> tuple[str, review_cache.Kept | None]:
    """The store's version and what review_cache holds for the Overview's default view at it."""
    with store.read() as con:
        version = review_cache.store_version(con)
        f = review_refresh.default_view(con)
        return version, review_cache.load(con, overview_review.view_key(f), version)


def _wait_kept(store) -> tuple[str, review_cache.Kept]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        version, kept = _kept_now(store)
        if kept is not None:
            return version, kept
        time.sleep(0.5)
    raise AssertionError(f"no review kept for the store's version {version} after {WAIT_S} s")


def _served_from_kept(store, kept: review_cache.Kept, monkeypatch) -> None:
    """The Overview's read of the review returns the kept rows: computing it again would raise."""
    def computed(*a, **kw):
        raise AssertionError("the Overview computed the review instead of reading the kept one")
    with monkeypatch.context() as m:
        m.setattr(overview_review, "_overview_parts", computed)
        with store.read() as con:
            f = review_refresh.default_view(con)
        served = overview_review.overview(store, f)
    assert served.computed_at == kept.computed_at and served.seconds == kept.seconds
    assert list(served.parts) == ["verdicts", "hotspots", "storms"]


def test_ingest_command_keeps_the_default_review_current(tmp_path, monkeypatch):
    assert FIRST and LATER
    db = tmp_path / "cw.duckdb"
    r = _cw("ingest", *FIRST, "--db", db, "--quiet")
    assert r.returncode == 0, r.stderr
    store = open_store(db)
    version, kept = _wait_kept(store)
    assert kept.seconds is not None and len(kept.parts["hotspots"]) > 0
    _served_from_kept(store, kept, monkeypatch)

    # more runs: a new version, its review kept by that ingest, the older version's rows gone
    r = _cw("ingest", *LATER, "--db", db, "--quiet")
    assert r.returncode == 0, r.stderr
    later_version, later = _wait_kept(store)
    assert later_version != version and later.computed_at > kept.computed_at
    with store.read() as con:
        assert con.execute("SELECT DISTINCT store_version FROM review_rows").fetchall() == [(later_version,)]
    _served_from_kept(store, later, monkeypatch)


def test_ingest_command_keeps_the_review_current_on_ducklake(lake_spec, tmp_path, monkeypatch):
    """The same on a DuckLake store: the refresher process finds it by the db and data path the
    ingest was given."""
    data = tmp_path / "lake-data"
    r = _cw("ingest", *FIRST[:3], "--db", lake_spec, "--data-path", data, "--quiet")
    assert r.returncode == 0, r.stderr
    store = open_store(lake_spec, data)
    try:
        _, kept = _wait_kept(store)
        _served_from_kept(store, kept, monkeypatch)
    finally:
        store.close()


def test_turned_off_the_ingest_leaves_the_review_to_the_visit(tmp_path):
    db = tmp_path / "cw.duckdb"
    r = _cw("ingest", *FIRST[:2], "--db", db, "--quiet", env={"COMPILEWATCH_REVIEW_REFRESH": "0"})
    assert r.returncode == 0, r.stderr
    store = open_store(db)
    # turned off, nothing computes it: a refresh run here (synchronously) finds it not kept
    assert _kept_now(store)[1] is None
    assert review_refresh.refresh(store) and _kept_now(store)[1] is not None


def test_inbox_worker_keeps_the_review_current_as_bundles_arrive(tmp_path, monkeypatch):
    db = tmp_path / "cw.duckdb"
    store = open_store(db)
    store.inbox_dir.mkdir(exist_ok=True)
    worker = subprocess.Popen([sys.executable, "-m", "compilewatch", "inbox", "--watch", "--interval", "0.2",
                               "--db", str(db)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        for bundle in FIRST[:3]:   # written under a dot-name and renamed into place, as collectors do
            shutil.copy(bundle, store.inbox_dir / f".{bundle.name}")
            os.replace(store.inbox_dir / f".{bundle.name}", store.inbox_dir / bundle.name)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with store.read() as con:
                runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
            version, kept = _kept_now(store) if runs == 3 else (None, None)
            if kept is not None:
                break
            time.sleep(0.5)
        assert kept is not None, "the worker's runs were stored but no review was kept for them"
        _served_from_kept(store, kept, monkeypatch)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err


def test_a_failing_refresh_leaves_the_ingest_whole(tmp_path, caplog, monkeypatch):
    """A setting the review cannot read makes every refresh fail: the ingest still stores its runs
    and exits 0, the failure is logged, and nothing is kept (the next visit would say why)."""
    bad = {"COMPILEWATCH_REVIEW_NOISE_SIGMAS": "three"}
    db = tmp_path / "cw.duckdb"
    r = _cw("ingest", *FIRST[:2], "--db", db, "--quiet", env=bad)
    assert r.returncode == 0, r.stderr
    store = open_store(db)
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 2
    for k, v in bad.items():
        monkeypatch.setenv(k, v)
    with caplog.at_level(logging.ERROR, logger=review_refresh.__name__):
        assert review_refresh.refresh(store) is False
    assert "the next visit computes it" in caplog.text and "COMPILEWATCH_REVIEW_NOISE_SIGMAS" in caplog.text
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM review_snapshots").fetchall()[0][0] == 0


def test_refreshers_at_once_compute_the_review_once(tmp_path, monkeypatch):
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, FIRST).ok
    computed = []
    real = overview_review._overview_parts

    def counted(con, f):
        computed.append(f)
        time.sleep(0.5)   # long enough that the other threads arrive while it computes
        return real(con, f)
    monkeypatch.setattr(overview_review, "_overview_parts", counted)
    results = []
    threads = [threading.Thread(target=lambda: results.append(review_refresh.refresh(store))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(computed) == 1 and results.count(True) >= 1
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM review_snapshots").fetchall()[0][0] == 1


def test_an_older_review_never_replaces_a_newer_one(tmp_path):
    """A refresher that read the store before another writer's ingest keeps nothing: it would have
    dropped the newer version's review for its own older one."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, FIRST).ok
    with store.read() as con:
        f = review_refresh.default_view(con)
        old_version = review_cache.store_version(con)
        old_parts = overview_review._overview_parts(con, f)
    assert ingest_paths(store, LATER[:2]).ok
    assert review_refresh.refresh(store)
    new_version, newer = _kept_now(store)
    assert newer is not None
    review_cache.keep(store, overview_review.view_key(f), old_version, old_parts, 1.0)
    with store.read() as con:
        assert con.execute("SELECT DISTINCT store_version FROM review_snapshots").fetchall() == [(new_version,)]
    assert _kept_now(store)[1].computed_at == newer.computed_at


@pytest.fixture(autouse=True)
def _refresh_on(monkeypatch):
    """The refresh as a team server has it, by default (tests/conftest.py turns it off elsewhere)."""
    monkeypatch.delenv("COMPILEWATCH_REVIEW_REFRESH", raising=False)
