"""`compilewatch store maintain` on real stores: a DuckLake team store after many small ingests has
fewer Parquet files and the same rows afterwards; on both backends a raw copy no stored file
references (what a process killed between keeping the copy and committing leaves) is deleted and
every referenced one is kept."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
NOT_INGESTED = REPO / "tests" / "fixtures" / "trace" / "deep_dive.log.gz"


def _counts(store) -> dict:
    with store.read() as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
            "AND table_schema = 'main' AND table_type = 'BASE TABLE'").fetchall()]
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables}


def _orphan(store) -> str:
    """The raw copy an ingest keeps before it commits: kept, never committed. Its path in the
    store's location (a folder or an S3 prefix)."""
    sha, rel, _ = store.keep_raw(NOT_INGESTED)
    return rel


def test_many_small_ingests_then_maintain_on_ducklake(lake_store_anywhere):
    """The same with the data path in a folder and on object storage (tests/conftest.py)."""
    lake_store = lake_store_anywhere
    for path in [TRACE, *TEXTS]:                 # one ingest each: a snapshot and small files each
        assert ingest_paths(lake_store, [path]).ok
    before = _counts(lake_store)
    orphan = _orphan(lake_store)
    env = {**os.environ, "COMPILEWATCH_DB": lake_store.spec, "COMPILEWATCH_DATA_PATH": lake_store.location.uri()}
    # a retention of 0 days: every snapshot but the newest is expired, so their files can go now
    r = subprocess.run([sys.executable, "-m", "compilewatch", "store", "maintain", "--expire-older-than", "0", "--json"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["backend"] == "ducklake" and "merge adjacent files" in out["steps"]
    assert out["data_files_after"] < out["data_files_before"], out
    assert _counts(lake_store) == before            # the same rows, in fewer files
    assert lake_store.location.exists(orphan)       # younger than an hour: maybe another host's ingest
    assert lake_store.maintain(0, orphan_min_age_s=0).orphaned_raw_deleted == 1
    assert not lake_store.location.exists(orphan)
    with lake_store.read() as con:
        kept = [r[0] for r in con.execute("SELECT stored_path FROM files").fetchall()]
    assert kept and all(lake_store.location.exists(p) for p in kept)


def test_maintain_on_the_embedded_store(tmp_path):
    store = open_store(tmp_path / "db" / "cw.duckdb")
    assert ingest_paths(store, [TRACE, *TEXTS]).ok
    before = _counts(store)
    orphan = _orphan(store)
    result = store.maintain(orphan_min_age_s=0)
    assert result.steps == ["checkpoint"] and result.orphaned_raw_deleted == 1 and not store.location.exists(orphan)
    assert _counts(store) == before
    with store.read() as con:
        assert all((store.folder / r[0]).exists() for r in con.execute("SELECT stored_path FROM files").fetchall())
