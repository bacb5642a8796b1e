"""Keeping a store fast as it is used (`compilewatch store maintain`).

DuckLake writes a few small Parquet files per table on every ingest and keeps every snapshot for
time travel, so a team store that ingests all day gathers thousands of small files that each page
query opens. Maintenance merges adjacent files, expires snapshots older than the retention, and
deletes the files nothing references any more. The embedded store checkpoints its write-ahead log.
Both delete raw copies that no stored file references: a process killed between keeping a file's
raw copy and committing its rows leaves one (it is harmless, and only takes space).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.store.objects import Folder, Location

# A raw copy younger than this may belong to an ingest still in flight on another host.
ORPHAN_MIN_AGE_S = 3600


@dataclass
class Maintained:
    backend: str
    data_files_before: int
    data_files_after: int
    bytes_before: int
    bytes_after: int
    orphaned_raw_deleted: int
    steps: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(vars(self))


def parquet_files(where: Location | Path) -> int:
    """Parquet files under a lake's data folder (a Path), or under lake/ of a store's Location."""
    loc, prefix = (where, "lake") if isinstance(where, Location) else (Folder(where), "")
    return sum(1 for e in loc.entries(prefix) if e.rel.endswith(".parquet"))


def delete_orphaned_raw(store, min_age_s: float = ORPHAN_MIN_AGE_S, now: float | None = None) -> int:
    """Delete raw/ copies whose sha256 no files row holds and that are older than ``min_age_s``."""
    now = time.time() if now is None else now
    with store.read() as con:
        kept = {r[0] for r in con.execute("SELECT DISTINCT sha256 FROM files").fetchall()}
    deleted = 0
    for e in store.location.entries("raw"):   # a folder or an S3 prefix (store/objects.py)
        if e.rel.rsplit("/", 1)[-1] not in kept and now - e.mtime > min_age_s:
            store.location.delete(e.rel)    # gone already: another host's maintenance got there first
            deleted += 1
    return deleted
