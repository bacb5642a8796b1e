"""Keeping pandas out of a process that only writes to DuckDB.

DuckDB's Python client imports pandas the first time a query binds a parameter (to recognise
pandas' missing-value markers), whether or not a pandas object is in sight. Importing pandas costs
about 0.5 s and 125 MB of resident memory, which was most of `compilewatch ingest`'s peak RSS: the
ingest never hands DuckDB a pandas object, so inside ``pandas_kept_out()`` an ``import pandas``
fails and DuckDB goes on without it. Scoped, so a process that goes on to need pandas (a test, the
dashboard) imports it normally afterwards; a process that already loaded pandas is left alone.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager


@contextmanager
def pandas_kept_out():
    if "pandas" in sys.modules:   # loaded already (the dashboard): nothing to save
        yield
        return
    sys.modules["pandas"] = None  # a None entry makes `import pandas` raise ImportError
    try:
        yield
    finally:
        if "pandas" in sys.modules and sys.modules["pandas"] is None:
            del sys.modules["pandas"]
