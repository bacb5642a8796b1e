"""The session store of real traces that the deep-dive tests read (deep_support lists them)."""
from __future__ import annotations

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import Store, open_store

from deep_support import SAMPLES, trace_paths


@pytest.fixture(scope="session")
def deep_store(tmp_path_factory) -> Store:
    store = open_store(tmp_path_factory.mktemp("deep") / "cw.duckdb")
    report = ingest_paths(store, trace_paths() + SAMPLES)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return store

