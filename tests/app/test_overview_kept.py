"""The Overview's review kept per store version (app/overview_review.py, store/review_cache.py), on
real collector bundles (tests/fixtures/review/labelled): computed once, then read as rows equal to what the review computes; a new
ingest makes a new store version and a new review; keeping it leaves the dashboard's caches valid;
the page says as of when."""
from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pandas as pd

from compilewatch.app import overview_review
from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import data_bounds
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, review_cache

REPO = Path(__file__).resolve().parents[2]
# a team's job under two labels, a graph break and recompiles added in v2 (its README says how)
BUNDLES = sorted((REPO / "tests" / "fixtures" / "review" / "labelled").glob("*.tar.gz"))
MORE = sorted((REPO / "sample_logs" / "cpu-torch2.14.1").glob("*.tar.gz"))[:1]


def _week(store) -> Filters:
    with store.read() as con:
        last = pd.Timestamp(data_bounds(con)["last_day"].iloc[0]).date()   # as the page's window holds it
    return Filters(start=last - timedelta(days=6), end=last)


def _same(kept: pd.DataFrame, live: pd.DataFrame, cols: list[str]) -> None:
    a = kept[cols].astype(str).reset_index(drop=True)
    b = live[cols].astype(str).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_review_kept_once_per_store_version(tmp_path):
    assert BUNDLES and MORE
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, BUNDLES).ok
    f = _week(store)
    version_before = store.data_version()

    first = overview_review.overview(store, f)
    with store.read() as con:
        live = overview_review._overview_parts(con, f)
        snaps = con.execute("SELECT count(*) FROM review_snapshots").fetchall()[0][0]
    assert snaps == 1
    assert (live["verdicts"]["status"] == "regression").any() and len(live["storms"]) > 0, live["verdicts"]
    # the rows kept equal what the review computes: the same verdicts, hotspots and storms
    _same(first.parts["verdicts"], live["verdicts"], ["status", "model", "hardware", "metric", "change", "summary",
                                                      "baseline_run", "candidate_run", "headline"])
    def evidence(frame):   # notes (own history, not compared) carry none
        return [[list(x) for x in e] if isinstance(e, (list, tuple)) else None for e in frame["evidence"]]
    assert evidence(first.parts["verdicts"]) == evidence(live["verdicts"])
    _same(first.parts["hotspots"], live["hotspots"], ["break_key", "occurrences", "runs", "models", "new_this_week"])
    _same(first.parts["storms"], live["storms"], ["run_id", "function", "recompiles", "limit_hits", "storm"])
    # keeping derived rows is no new data: the dashboard's other cached queries stay valid
    assert store.data_version() == version_before

    # the next page load reads the kept rows: same computation time and moment, nothing added
    again = overview_review.overview(store, f)
    assert again.computed_at == first.computed_at and again.seconds == first.seconds
    _same(again.parts["verdicts"], first.parts["verdicts"], ["status", "model", "metric", "change", "summary"])
    # another view (a model filter) is another row set beside it
    other = overview_review.overview(store, f.replace(models=(live["verdicts"]["model"].iloc[0],)))
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM review_snapshots").fetchall()[0][0] == 2
        version = review_cache.store_version(con)
    assert other.computed_at >= first.computed_at

    # a new ingest is a new store version: computed again, the old version's rows dropped
    assert ingest_paths(store, MORE).ok
    later = overview_review.overview(store, f)
    assert later.computed_at > first.computed_at
    with store.read() as con:
        now = review_cache.store_version(con)
        versions = con.execute("SELECT DISTINCT store_version FROM review_rows").fetchall()
    assert now != version and versions == [(now,)]

    # a copy of the store keeps its version, and so its review
    copy_dir = tmp_path / "copy"
    shutil.copytree(tmp_path, copy_dir, ignore=shutil.ignore_patterns("copy"))
    copied = open_store(copy_dir / "cw.duckdb")
    assert overview_review.overview(copied, f).computed_at == later.computed_at


def test_the_page_keeps_the_review_and_its_next_visit_reads_it(app_at, tmp_path):
    """The first visit computes the Overview's review and keeps it; a later visit (caches cleared,
    as after a restart) reads those rows, nothing computed again, and says as of when."""
    import streamlit as st
    db = tmp_path / "cw.duckdb"
    store = open_store(db)
    assert ingest_paths(store, BUNDLES).ok
    at = app_at(db, "views/overview.py")
    assert not at.exception
    with store.read() as con:
        kept = con.execute("SELECT view_key, computed_at FROM review_snapshots").fetchall()
    assert len(kept) == 1 and kept[0][0] == overview_review.view_key(_week(store))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = app_at(db, "views/overview.py")
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any(c.startswith(f"Review as of {kept[0][1]:%Y-%m-%d %H:%M} UTC") for c in captions), captions
    assert any("Got worse" in h.value for h in at.subheader), "the kept regressions are drawn"
    with store.read() as con:
        assert con.execute("SELECT view_key, computed_at FROM review_snapshots").fetchall() == kept
