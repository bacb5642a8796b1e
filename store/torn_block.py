"""A DuckDB block torn by a kill in the middle of its write, and putting its checksum right.

DuckDB keeps its catalog in metadata blocks of 64 slots, and a checkpoint writes new metadata into
the free slots of a block that still holds live slots of the checkpoint before, rewriting the whole
block in place. A killed process can leave that write half done: Linux ends a buffered write between
pages when a fatal signal is pending, and a writer throttled for dirty pages (a busy disk) sleeps
inside its write long enough for a kill -9 to land there. The block's first pages are then the new
ones, checksum included, and the rest the old; DuckDB refuses the whole database ("Corrupt database
file: computed checksum A does not match stored checksum B in block at location L").

The content is not damaged: the slots that the last finished checkpoint points to were copied into
the new version unchanged, and the slots that differ are ones no finished checkpoint points to yet.
Only the checksum is wrong, so writing the checksum of what the block now holds gives back the
database as the last finished checkpoint left it (plus its write-ahead log). The repair is done only
when our checksum of the block on disk equals the `computed` value DuckDB reported, which confirms
the block's place, size and checksum rule, and the block's old bytes are kept beside the database.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

CORRUPT_BLOCK = re.compile(r"Corrupt database file: computed checksum (\d+) does not match stored checksum (\d+) "
                           r"in block at location (\d+)")
# DuckDB's default block size, then the other sizes a database may have been created with.
BLOCK_SIZES = (262144, 16384, 32768, 65536, 131072, 524288, 1048576)
CHECKSUM_BYTES = 8
_MASK = (1 << 64) - 1
_MULTIPLIER = 0xBF58476D1CE4E5B9   # DuckDB's Checksum(uint64_t): x * this constant, the words xor-ed


@dataclass(frozen=True)
class TornBlock:
    location: int     # byte offset of the block in the database file
    computed: int     # what DuckDB computed over the block's content
    stored: int       # the checksum the block carries

    @classmethod
    def from_error(cls, message: str) -> "TornBlock | None":
        m = CORRUPT_BLOCK.search(message)
        return cls(int(m.group(3)), int(m.group(1)), int(m.group(2))) if m else None


def checksum(content: bytes) -> int:
    """DuckDB's block checksum (src/common/checksum.cpp) of a block's content, whose length is a
    multiple of 8 for every block size."""
    result = 5381
    for (word,) in struct.iter_unpack("<Q", content):
        result ^= (word * _MULTIPLIER) & _MASK
    return result


def restore(db_path: Path, torn: TornBlock, kept: Path) -> None:
    """Put the block's old bytes back (its repair did not give a database that reads whole)."""
    with open(db_path, "r+b") as f:
        f.seek(torn.location)
        f.write(kept.read_bytes())
        f.flush()
        os.fsync(f.fileno())
    kept.unlink()


def read_whole(con) -> None:
    """Read every row of every table, so that every block is read and its checksum checked; raises
    what DuckDB raises."""
    for schema, table in con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall():
        con.execute(f'SELECT bit_xor(hash(x)) FROM "{schema}"."{table}" AS x').fetchall()


def repair(db_path: Path, torn: TornBlock) -> Path | None:
    """Write the checksum of what the block holds now; returns where its old bytes were kept, or None
    when no block size reproduces DuckDB's computed checksum (then the damage is something else and
    the file is left as it is). The caller holds the store's exclusive lock."""
    with open(db_path, "r+b") as f:
        f.seek(torn.location)
        largest = f.read(max(BLOCK_SIZES))
        for size in BLOCK_SIZES:
            block = largest[:size]
            if len(block) != size:
                continue
            stored = struct.unpack_from("<Q", block)[0]
            if stored != torn.stored or checksum(block[CHECKSUM_BYTES:]) != torn.computed:
                continue
            kept = db_path.with_name(f"{db_path.name}.torn-{torn.location}")
            kept.write_bytes(block)
            f.seek(torn.location)
            f.write(struct.pack("<Q", torn.computed))
            f.flush()
            os.fsync(f.fileno())
            return kept
    return None
