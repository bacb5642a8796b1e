"""One run's rows of an event table, read without scanning the whole table."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, TypeVar

from compilewatch.store.files import one

# Inside a store's reads_held block, each run's file-id bounds are looked up once per thread: a
# run detail page asks for one run's rows ~15 times, and on DuckLake each lookup is a query through
# the catalog (~20 ms). The block ends before, or is told at (forget_bounds), any write of its thread.
_remembered = threading.local()
T = TypeVar("T")


@contextmanager
def bounds_remembered():
    outer = getattr(_remembered, "bounds", None)
    if outer is None:
        _remembered.bounds = {}
    try:
        yield
    finally:
        if outer is None:
            _remembered.bounds = None


def remembered(key: tuple, compute: Callable[[], T]) -> T:
    """compute() once per key inside a store's reads_held block of this thread (at every call
    outside one): what two of a page's queries both read about a run, such as its subgraphs, is
    read once per render. The block sees one snapshot of the store; a write of its thread forgets
    it (forget_bounds). The value is shared: callers must not change it."""
    memo = getattr(_remembered, "bounds", None)
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def forget_bounds() -> None:
    """A write of this thread may have added files to a run: look the bounds up again."""
    if getattr(_remembered, "bounds", None):
        _remembered.bounds = {}


def _bounds(con, run_id: str | None) -> tuple:
    memo = getattr(_remembered, "bounds", None)
    if memo is not None and run_id in memo:
        return memo[run_id]
    cur = con.cursor()
    try:
        found = tuple(one(cur, "SELECT min(file_id), max(file_id) FROM files WHERE run_id = ?", [run_id]))
    finally:
        cur.close()
    if memo is not None:
        memo[run_id] = found
    return found


def run_filter(con, run_id: str | None, alias: str = "") -> str:
    """WHERE clause over an event table (``alias``) for one run's rows, with one ``?`` for its id.

    Besides the run id it bounds file_id by the run's files, as integer literals: every event row
    carries its file's id and a file's rows are appended together, so DuckDB's per-row-group min/max
    of file_id (and DuckLake's per-Parquet-file statistics) skip the rest of a table of millions of
    rows, which the run id alone cannot do (string statistics keep only a short prefix)."""
    a = f"{alias}." if alias else ""
    lo, hi = _bounds(con, run_id)
    if lo is None:
        return f"{a}run_id = ?"
    return f"{a}run_id = ? AND {a}file_id BETWEEN {int(lo)} AND {int(hi)}"
