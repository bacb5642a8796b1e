"""The Overview's review kept per store version (store/review_cache.py): its verdicts
(app/queries/review.py, the same ``assemble`` as ``report`` and ``check``) and the top hotspots and
storms beside them, computed by the first page load after the data changed and read as rows by
every later one, on every host that shares the store."""
from __future__ import annotations

import hashlib
import json
import time as clock
from datetime import datetime, timezone

import pandas as pd

from compilewatch.app.filters import Filters, to_params
from compilewatch.app.queries import hotspots, recompiles, review
from compilewatch.core.errors import StoreBusyError
from compilewatch.review.rules import Rules, pinned_baseline
from compilewatch.store import review_cache

TOP = 10   # hotspots and storms beside the verdicts


def view_key(f: Filters) -> str:
    """What the Overview's review depends on besides the data: the filters it reads and the team's
    rules and pinned baseline (settings): a change to any of them is another view."""
    def day(d):   # a date however it came (a pandas Timestamp prints differently)
        return None if d is None else pd.Timestamp(d).date()
    f = Filters(models=f.models, torch_versions=f.torch_versions, labels=f.labels, hardware=f.hardware,
                start=day(f.start), end=day(f.end))
    text = json.dumps([to_params(f), repr(Rules.from_settings()), pinned_baseline()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _overview_parts(con, f: Filters) -> dict[str, pd.DataFrame]:
    """The parts of the Overview's review: verdicts, the top hotspots and the top storms."""
    return {"verdicts": review.verdicts(con, f), "hotspots": hotspots.hotspots(con, f.replace(limit=TOP)),
            "storms": recompiles.storms(con, f.replace(limit=TOP))}


def overview(store, f: Filters) -> review_cache.Kept:
    """The Overview's review for f, as kept for the store's current version; computed (and kept for
    every later page load, on every host) when none is. When the store cannot be written now (another
    process holds the writer lock past the timeout) the review is shown and kept next time."""
    key = view_key(f)
    with store.read() as con:
        version = review_cache.store_version(con)
        kept = review_cache.load(con, key, version)
        if kept is not None:
            return kept
        t = clock.perf_counter()
        parts = _overview_parts(con, f)
        seconds = clock.perf_counter() - t
    try:
        return review_cache.keep(store, key, version, parts, seconds)
    except StoreBusyError:
        return review_cache.Kept(datetime.now(timezone.utc), seconds, parts)

