"""What a store holds after ingesting files one at a time: the tests that split a file across
processes compare it with what one parse stores."""
from __future__ import annotations

from pathlib import Path

from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.records import EVENT_TABLES
from compilewatch.store import open_store


def stored_tables(db: Path, files: list[Path], workers: int) -> dict:
    """Ingest each file on its own into a fresh store; every table's rows in the order stored."""
    store = open_store(db)
    for f in files:
        ingest_paths(store, [f], workers=workers)
    out = {}
    with store.read() as con:
        for t in (*EVENT_TABLES, "ingest_errors"):
            out[t] = con.execute(f"SELECT * EXCLUDE (rid) FROM (SELECT rowid AS rid, * FROM {t}) ORDER BY rid").fetchall()
        out["files"] = con.execute("SELECT file_id, sha256, status, records, errors FROM files ORDER BY file_id").fetchall()
    return out
