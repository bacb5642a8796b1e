"""A plain TORCH_TRACE's artifact payloads are not copied into the store: each row names its record's
place in the file's raw copy (raw_offset, raw_length), and the deep dive reads the payload there
again (deepdive.artifacts.fetch). A gzipped file cannot be read at an offset: its payloads stay
compressed in payload_z.

Checked on real traces (the sample bundles' and the fixtures', as in test_trace_ranges.py), as they
are and with a copy's damage: every artifact of the plain file reads back exactly the payload that
its gzipped twin stores, read in one piece and in ranges cut every few KB, and after a reingest.
"""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from test_trace_ranges import _damaged, _small_ranges, _traces

from compilewatch.core.errors import NotFoundError
from compilewatch.deepdive import artifacts
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.reingest import reingest
from compilewatch.ingest.trace.parsers.artifacts import PAYLOAD_EVENTS
from compilewatch.store import open_store
from compilewatch.store.copy import copy_store

PAYLOAD_KINDS = (*PAYLOAD_EVENTS, "artifact")


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[tuple[Path, Path]]:
    """(plain, gzipped) pairs of the same bytes: the samples' traces whole, and with a copy's damage;
    one trace with CRLF line ends, one cut off inside a payload."""
    folder = tmp_path_factory.mktemp("refs")
    pieces = _traces()
    whole = b"".join(pieces)
    small = min(pieces, key=len)
    out = []
    for name, data in (("whole", whole), ("damaged", _damaged(whole)), ("crlf", small.replace(b"\n", b"\r\n")),
                       ("cut", small[:len(small) * 2 // 3])):
        plain = folder / name / f"{name}.log"
        plain.parent.mkdir()
        plain.write_bytes(data)
        zipped = plain.with_name(f"{name}-gz.log.gz")
        zipped.write_bytes(gzip.compress(data, 1))
        out.append((plain, zipped))
    return out


def _ingest(db: Path, files: list[Path], workers: int = 1):
    store = open_store(db)
    for f in files:
        ingest_paths(store, [f], workers=workers)
    return store


def _artifacts(store) -> dict[str, list[tuple]]:
    """Per file name: every artifact row (without payload columns) with its payload as fetched,
    and whether it is kept as a reference into the raw copy."""
    out: dict[str, list[tuple]] = {}
    with store.read() as con:
        files = con.execute("SELECT file_id, run_id, original_name FROM files").fetchall()
        for file_id, run_id, name in files:
            rows = con.execute(
                "SELECT line_no, compile_id, rank, kind, name, encoding, size_bytes, payload_z IS NULL, "
                "raw_offset IS NOT NULL FROM artifacts WHERE file_id = ? ORDER BY line_no", [file_id]).fetchall()
            out[Path(name).name.replace("-gz.log.gz", ".log")] = [
                (*r, artifacts.fetch(con, run_id, file_id, r[0]).text) for r in rows]
    return out


@pytest.fixture(scope="module")
def gzipped(traces, tmp_path_factory) -> dict:
    return _artifacts(_ingest(tmp_path_factory.mktemp("gz") / "cw.duckdb", [z for _, z in traces]))


def _same_payloads(plain: dict, gz: dict) -> None:
    assert plain.keys() == gz.keys()
    for name in plain:
        mine, theirs = plain[name], gz[name]
        assert len(mine) == len(theirs) > 0, name
        assert [r[:7] for r in mine] == [r[:7] for r in theirs], name
        assert [r[9] for r in mine] == [r[9] for r in theirs], name   # the payloads, as fetched
        # a gzipped file's rows hold their payloads, never a place in the file
        assert not any(r[8] for r in theirs) and all(r[7] is False for r in theirs if r[3] in PAYLOAD_KINDS)
        # a plain file's payload rows hold a place and no payload; value records stay compressed
        refs = [r for r in mine if r[3] in PAYLOAD_KINDS]
        assert refs and all(r[7] and r[8] for r in refs), name
        assert not any(r[8] for r in mine if r[3] not in PAYLOAD_KINDS), name


def test_a_plain_trace_stores_places_that_read_back_its_gzipped_twins_payloads(traces, gzipped, tmp_path):
    store = _ingest(tmp_path / "cw.duckdb", [p for p, _ in traces])
    _same_payloads(_artifacts(store), gzipped)
    with store.read() as con:
        blobs = con.execute("SELECT coalesce(sum(octet_length(payload_z)), 0) FROM artifacts "
                            "WHERE raw_offset IS NOT NULL").fetchall()[0][0]
    assert blobs == 0


def test_ranges_read_by_other_processes_store_the_same_places(traces, gzipped, tmp_path, monkeypatch):
    _small_ranges(monkeypatch, 16 << 10)
    store = _ingest(tmp_path / "cw.duckdb", [p for p, _ in traces], workers=2)
    _same_payloads(_artifacts(store), gzipped)


def test_reingest_keeps_the_places_and_a_lost_raw_copy_is_named(traces, gzipped, tmp_path):
    store = _ingest(tmp_path / "cw.duckdb", [p for p, _ in traces[2:]])
    assert reingest(store, all_files=True) == 2
    found = _artifacts(store)
    assert len(found) == 2
    _same_payloads(found, {k: v for k, v in gzipped.items() if k in found})
    with store.read() as con:
        run_id, file_id, stored = con.execute("SELECT run_id, file_id, stored_path FROM files "
                                              "WHERE original_name LIKE '%crlf.log'").fetchall()[0]
        line_no = con.execute("SELECT min(line_no) FROM artifacts WHERE file_id = ? AND raw_offset IS NOT NULL",
                              [file_id]).fetchall()[0][0]
        shutil.move(store.folder / stored, tmp_path / "moved")
        with pytest.raises(NotFoundError) as e:
            artifacts.fetch(con, run_id, file_id, line_no)
        assert stored in str(e.value) and "raw/" in e.value.hint


def test_a_shared_store_reads_the_places_under_its_data_path(traces, gzipped, lake_store):
    """DuckLake keeps the raw copies under the data path every host reaches: a fetch through the
    lake's connection finds them there."""
    for plain, _ in traces[2:]:
        assert ingest_paths(lake_store, [plain]).ok
    found = _artifacts(lake_store)
    assert len(found) == 2
    _same_payloads(found, {k: v for k, v in gzipped.items() if k in found})


def test_a_copied_store_reads_the_places_in_its_own_raw_copies(traces, gzipped, tmp_path):
    src = _ingest(tmp_path / "a" / "cw.duckdb", [p for p, _ in traces[2:]])
    dst = open_store(tmp_path / "b" / "cw.duckdb")
    copy_store(src, dst)
    shutil.rmtree(tmp_path / "a")   # nothing is read from the source any more
    found = _artifacts(dst)
    assert len(found) == 2
    _same_payloads(found, {k: v for k, v in gzipped.items() if k in found})
