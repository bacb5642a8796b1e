"""A block a killed writer left half written: the store mends its checksum and opens as the last
finished checkpoint left it. DuckDB rewrites a metadata block in place when the block has free slots
and no free block lies before it. The torn files are made the way a kill makes them: a real store
(A), the same store one write and one checkpoint later (B), and A with the first page of one of the
metadata blocks B rewrote in place (the kernel ends a buffered write between pages when the writer
is killed)."""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import duckdb
import pytest

from compilewatch.core.errors import StoreCorruptError
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, torn_block

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:2]
FILE_HEADERS = 3 * 4096      # DuckDB's main header and its two database headers
BLOCK = 262144
PAGE = 4096


def _contents(db: Path) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        return {t: con.execute(f'SELECT count(*), bit_xor(hash(x)) FROM "{t}" AS x').fetchall()[0] for (t,) in tables}
    finally:
        con.close()


@pytest.fixture(scope="module")
def before_after(tmp_path_factory):
    """(A, B, the metadata blocks B rewrote in place): A is a real store's ingest copied into a new
    file (no free blocks, so the next checkpoint reuses metadata blocks' free slots), B is A after
    one more write and checkpoint."""
    root = tmp_path_factory.mktemp("torn")
    store = open_store(root / "ingested" / "cw.duckdb")
    assert ingest_paths(store, BUNDLES).ok
    a = root / "a.duckdb"
    con = duckdb.connect(str(a))
    con.execute(f"ATTACH '{store.db_path}' AS ingested (READ_ONLY)")
    con.execute("COPY FROM DATABASE ingested TO a")
    con.execute("DETACH ingested")
    con.close()
    b = root / "b.duckdb"
    for step in range(6):
        con = duckdb.connect(str(a), read_only=True)
        live = [r[0] for r in con.execute("SELECT block_id FROM pragma_metadata_info()").fetchall()]
        con.close()
        shutil.copy(a, b)
        con = duckdb.connect(str(b))
        con.execute("INSERT INTO runs (run_id, model) VALUES (?, 'written after A')", [f"after-a-{step}"])
        con.execute("CHECKPOINT")
        con.close()
        old, new = a.read_bytes(), b.read_bytes()
        rewritten = [FILE_HEADERS + i * BLOCK for i in sorted(live)
                     if old[FILE_HEADERS + i * BLOCK:FILE_HEADERS + (i + 1) * BLOCK]
                     != new[FILE_HEADERS + i * BLOCK:FILE_HEADERS + (i + 1) * BLOCK]]
        if rewritten:
            return a, b, rewritten
        shutil.copy(b, a)
    pytest.fail("no checkpoint rewrote a live metadata block in place")


def _torn(a: Path, b: Path, loc: int) -> bytes:
    """A, with the first page of B's version of the block at `loc`."""
    old, new = a.read_bytes(), b.read_bytes()
    return old[:loc] + new[loc:loc + PAGE] + old[loc + PAGE:]


def test_a_torn_block_is_mended_and_the_store_opens_as_the_last_checkpoint_left_it(before_after, tmp_path):
    a, b, rewritten = before_after
    want = _contents(a)
    for loc in rewritten:
        db = tmp_path / str(loc) / "cw.duckdb"
        db.parent.mkdir()
        torn = _torn(a, b, loc)
        db.write_bytes(torn)
        with pytest.raises(duckdb.IOException) as refused:      # what DuckDB alone makes of it
            duckdb.connect(str(db), read_only=True).close()
        assert torn_block.TornBlock.from_error(str(refused.value)).location == loc
        store = open_store(db)                                  # mends, then migrates as usual
        assert _contents(db) == want
        assert (db.parent / f"cw.duckdb.torn-{loc}").read_bytes() == torn[loc:loc + BLOCK]
        with store.read() as con:
            assert con.execute("SELECT count(*) FROM runs WHERE model = 'written after A'").fetchone()[0] == 0


def test_a_block_whose_checksum_does_not_match_what_duckdb_reported_is_left_alone(before_after, tmp_path):
    a, b, rewritten = before_after
    loc = rewritten[0]
    torn = _torn(a, b, loc)
    db = tmp_path / "cw.duckdb"
    db.write_bytes(torn)
    block = torn[loc:loc + BLOCK]
    stored = struct.unpack_from("<Q", block)[0]
    wrong = torn_block.TornBlock(loc, computed=torn_block.checksum(block[8:]) ^ 1, stored=stored)
    assert torn_block.repair(db, wrong) is None
    assert db.read_bytes() == torn and not list(tmp_path.glob("*.torn-*"))


def test_damage_that_is_not_a_torn_write_stays_a_store_error(before_after, tmp_path):
    """A metadata block overwritten with garbage under its old checksum: our checksum of it is
    DuckDB's computed one, so it is mended, but then the catalog cannot be read; the block's bytes
    are put back and the error says so."""
    a, _, rewritten = before_after
    loc = rewritten[0]
    damaged = bytearray(a.read_bytes())
    damaged[loc + 8:loc + BLOCK] = b"\xa5" * (BLOCK - 8)
    db = tmp_path / "cw.duckdb"
    db.write_bytes(bytes(damaged))
    with pytest.raises(StoreCorruptError):
        open_store(db)
    assert db.read_bytes() == bytes(damaged) and not list(tmp_path.glob("*.torn-*"))
