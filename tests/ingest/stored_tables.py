"""What a store holds after ingesting files one at a time: the tests that split a file across
processes compare it with what one parse stores."""
from __future__ import annotations

import zlib
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
            out[t] = rows_in_order(con, t)
        out["files"] = con.execute("SELECT file_id, sha256, status, records, errors FROM files ORDER BY file_id").fetchall()
    return out


def rows_in_order(con, table: str) -> list[tuple]:
    """Every row of `table` in the order stored, its compressed payloads read back (read_back)."""
    cur = con.execute(f"SELECT * EXCLUDE (rid) FROM (SELECT rowid AS rid, * FROM {table}) ORDER BY rid")
    return read_back([d[0] for d in cur.description], cur.fetchall())


def read_back(columns: list[str], rows: list[tuple]) -> list[tuple]:
    """`rows` with each artifact's payload_z decompressed. Deflate may encode one payload in other
    bytes from one process to another: an ingest in two parse workers once stored a 847-byte
    dynamo_start stack as a stream that differed from one process's from its 25th byte on, and
    decompressed to the same 847 bytes. What the store keeps is the payload, not its encoding."""
    if "payload_z" not in columns:
        return rows
    i = columns.index("payload_z")
    return [r[:i] + (None if r[i] is None else zlib.decompress(r[i]),) + r[i + 1:] for r in rows]
