"""A TORCH_TRACE file read in byte ranges by several processes (ingest/trace_ranges.py) stores exactly
the rows of one parse: every table's rows in the same order, the same line numbers, the same
compressed artifacts, the same errors where one reader reports them, the same counts.

Checked on real traces: the sample bundles' and the fixtures' traces one after the other,
once as they are and once with the damage a copied or cut file shows (a payload line lost, a blank
line inside a payload, tab lines with no envelope, a line of NUL bytes), with ranges forced small
(a few KB instead of RANGE_BYTES) so that cuts land all over it.
"""
from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

import pytest
from stored_tables import stored_tables

from compilewatch.ingest import trace_ranges
from compilewatch.ingest.parsing import Stop, Tally
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.summary import summarize

REPO = Path(__file__).resolve().parents[2]


def _traces() -> list[bytes]:
    out = []
    for archive in sorted((REPO / "sample_logs").glob("*/*.tar.gz")):
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and "/trace/" in m.name:
                    data = tf.extractfile(m).read()
                    out.append(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    out += [gzip.decompress(p.read_bytes()) for p in sorted((REPO / "tests" / "fixtures" / "trace").glob("*.log.gz"))]
    # tlparse's vLLM and subgraph samples: what a record owes to the records before it (its vLLM piece)
    out += [p.read_bytes() for p in sorted((REPO / "tests" / "fixtures" / "trace" / "tlparse").glob("*.log"))]
    # the smaller ones (~6 MB in all): every kind of run the samples hold, at a test's cost
    return [d if d.endswith(b"\n") else d + b"\n" for d in out if d.strip() and len(d) < 700_000]


def _damaged(data: bytes) -> bytes:
    """Every 7th payload loses a line (md5 mismatch), every 11th gets a blank line inside, and
    every 13th envelope is followed by tab lines of no payload or a line of NUL bytes."""
    lines = data.split(b"\n")
    out = []
    envelopes = payload_lines = 0
    for line in lines:
        if line.startswith(b"\t"):
            payload_lines += 1
            if payload_lines % 7 == 3:
                continue
            if payload_lines % 11 == 5:
                out.append(b"")
        elif line:
            envelopes += 1
            if envelopes % 13 == 0:
                out.append(b"\x00\x00\x00" if envelopes % 26 == 0 else b"\torphan payload line")
        out.append(line)
    return b"\n".join(out)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("trace")
    whole = b"".join(_traces())
    plain, damaged = folder / "plain" / "trace.log", folder / "damaged" / "trace.log"
    for path, data in ((plain, whole), (damaged, _damaged(whole))):
        path.parent.mkdir()
        path.write_bytes(data)
    return [plain, damaged]


_REAL_READ_RANGE = trace_ranges.read_range
_PARENT = os.getpid()


# Module-level, so that a worker is handed them by name, as it is handed the real one.
def _read_range_logged(path, rng, spool_dir):
    with open(spool_dir / "pids", "a") as f:
        f.write(f"{os.getpid()}\n")
    return _REAL_READ_RANGE(path, rng, spool_dir)


def _read_range_dying(path, rng, spool_dir):
    if os.getpid() != _PARENT:
        raise MemoryError("worker out of memory")
    return _REAL_READ_RANGE(path, rng, spool_dir)


@pytest.fixture(scope="module")
def one(traces, tmp_path_factory) -> dict:
    """What one parse of each file stores."""
    return stored_tables(tmp_path_factory.mktemp("one") / "db.duckdb", traces, 1)


def _small_ranges(monkeypatch, size: int) -> None:
    monkeypatch.setattr(trace_ranges, "MIN_RANGE_BYTES", 1)
    monkeypatch.setattr(trace_ranges, "RANGE_BYTES", size)
    monkeypatch.setattr(trace_ranges, "SPOOL_BATCH_BYTES", 4096)


@pytest.mark.parametrize("range_kb", [16, 1024])
def test_ranges_store_one_parse(traces, one, tmp_path, monkeypatch, range_kb):
    _small_ranges(monkeypatch, range_kb << 10)
    ranged = stored_tables(tmp_path / "ranged" / "db.duckdb", traces, 3)
    assert ranged == one
    assert len(one["artifacts"]) > 500 and len(one["compile_phases"]) > 500 and one["recompiles"]
    assert len(one["ingest_errors"]) > 50   # the damaged copy's errors, at the same lines


def test_ranges_are_used(traces, tmp_path, monkeypatch):
    """The file above is really read in many ranges, every one by a worker: the envelopes and
    lines counted over the ranges are those of one reader."""
    _small_ranges(monkeypatch, 16 << 10)
    path = traces[0]
    assert len(trace_ranges.cut(path, path.stat().st_size, 16 << 10)) > 100
    monkeypatch.setattr(trace_ranges, "read_range", _read_range_logged)
    pids = []
    real_replay = trace_ranges._replay

    def replay(parser, rng, line_offset, on_bytes=None):   # before the spool folder goes
        pids[:] = (rng.spool.parent / "pids").read_text().split()
        real_replay(parser, rng, line_offset, on_bytes)
    monkeypatch.setattr(trace_ranges, "_replay", replay)
    sink = StagingSink(tmp_path)
    try:
        stats = trace_ranges.parse_in_ranges(Tally(sink), path, 2, sink.dir)
        assert stats is not None
        assert stats.lines == path.read_bytes().count(b"\n") and stats.envelopes > 1000
        assert not list(sink.dir.glob("trace-ranges-*"))   # spool files removed
    finally:
        sink.cleanup()
    assert len(pids) > 100 and str(os.getpid()) not in pids and len(set(pids)) <= 2


def test_every_cut_starts_an_envelope_line(traces):
    path = traces[1]
    data = path.read_bytes()
    ranges = trace_ranges.cut(path, len(data), 8 << 10, scan=1 << 20)
    assert ranges[0].start == 0 and ranges[-1].end == len(data)
    for a, b in zip(ranges, ranges[1:]):
        assert a.end == b.start and data[b.start - 1:b.start] == b"\n"
        assert chr(data[b.start]) in "IWEVDFC"


def test_small_file_is_one_piece(tmp_path):
    path = tmp_path / "trace.log"
    path.write_bytes(_traces()[0])
    sink = StagingSink(tmp_path)
    try:
        assert trace_ranges.parse_in_ranges(Tally(sink), path, 8, sink.dir) is None   # below MIN_RANGE_BYTES
        assert not sink.batches
    finally:
        sink.cleanup()


def test_worker_that_dies_is_replaced(traces, one, tmp_path, monkeypatch):
    """A worker that fails (here: every one, out of memory) costs its ranges' speed, not the file:
    they are read in this process, with the same rows."""
    _small_ranges(monkeypatch, 256 << 10)
    monkeypatch.setattr(trace_ranges, "read_range", _read_range_dying)
    assert stored_tables(tmp_path / "ranged" / "db.duckdb", traces, 2) == one


def test_stop_ends_after_the_current_range(traces, tmp_path, monkeypatch):
    """A stop (the content turned out to be stored already) ends the read early."""
    _small_ranges(monkeypatch, 64 << 10)
    stop = Stop()
    seen = []

    def on_bytes(n):
        seen.append(n)
        stop()
    sink = StagingSink(tmp_path)
    try:
        stats = trace_ranges.parse_in_ranges(Tally(sink), traces[0], 2, sink.dir, on_bytes, stop)
        first = trace_ranges.cut(traces[0], traces[0].stat().st_size)[0]
        # progress comes within a range too; the read ends with the range it was stopped in
        assert seen and max(seen) == first.end and stats.lines < traces[0].read_bytes().count(b"\n")
    finally:
        sink.cleanup()


def test_summarize_in_ranges_counts_one_parse(traces, monkeypatch):
    """`summarize` reads a large trace in ranges too, and counts exactly what one parse counts."""
    ones = [summarize([path], workers=1) for path in traces]
    _small_ranges(monkeypatch, 64 << 10)
    used = []
    real = trace_ranges.parse_in_ranges
    monkeypatch.setattr(trace_ranges, "parse_in_ranges", lambda *a, **k: used.append(real(*a, **k)) or used[-1])
    assert [summarize([path], workers=3) for path in traces] == ones
    assert len(used) == 2 and None not in used
    assert ones[0]["recompiles"] and ones[1]["errors"] > 50
