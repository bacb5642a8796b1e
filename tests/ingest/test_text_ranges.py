"""A TORCH_LOGS text file parsed in byte ranges by several processes (ingest/text_ranges.py) stores
exactly the rows of one parse: every table's rows in the same order, the same recompile numbers,
the same errors at the same line numbers, the same counts.

Checked on real text logs: each text fixture on its own, and every sample bundle's torch_logs.txt
with the fixtures, one after the other and then again (as the ingest benchmark builds its input),
so that many processes' records are open at every cut, the same processes come back after it, and
records of the same process repeat their prefix across it. Ranges are forced small (a few KB
instead of MIN_RANGE_BYTES), so cuts land all over each file.
"""
from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

import pytest
from stored_tables import stored_tables

from compilewatch.ingest import text_ranges
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.summary import MAX_ERROR_SAMPLES, SummarySink, summarize

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted((REPO / "tests" / "fixtures" / "text").glob("*.log"))


def _bundle_texts() -> list[bytes]:
    out = []
    for archive in sorted((REPO / "sample_logs").glob("*/*.tar.gz")):
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith("/torch_logs.txt"):
                    data = tf.extractfile(m).read()
                    out.append(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return out


@pytest.fixture(scope="module")
def concatenated(tmp_path_factory) -> Path:
    pieces = [d if d.endswith(b"\n") else d + b"\n" for d in _bundle_texts() + [p.read_bytes() for p in FIXTURES]]
    path = tmp_path_factory.mktemp("text") / "torch_logs.txt"
    path.write_bytes(b"".join(pieces) * 2)
    return path


@pytest.mark.parametrize("workers", [3])
def test_fixtures_in_ranges_store_one_parse(tmp_path, monkeypatch, workers):
    one = stored_tables(tmp_path / "one" / "db.duckdb", FIXTURES, 1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 512)
    ranged = stored_tables(tmp_path / "ranged" / "db.duckdb", FIXTURES, workers)
    assert ranged == one
    assert sum(len(v) for v in one.values()) > 100


@pytest.mark.parametrize("workers", [2, 16])
def test_many_processes_in_ranges_store_one_parse(concatenated, tmp_path, monkeypatch, workers):
    one = stored_tables(tmp_path / "one" / "db.duckdb", [concatenated], 1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 4096)
    ranged = stored_tables(tmp_path / "ranged" / "db.duckdb", [concatenated], workers)
    assert ranged == one
    assert len(one["recompiles"]) > 300 and one["guard_failures"] and one["ingest_errors"]


def test_ranges_are_used(concatenated, tmp_path, monkeypatch):
    """The files above are really parsed in ranges (not in one piece after a cut that could not be
    put back): records left open across cuts are finished where one parse finishes them."""
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 4096)
    sink = StagingSink(tmp_path)
    try:
        parsed = text_ranges.parse_in_ranges(sink, concatenated, 16)
        assert parsed is not None and parsed.records["recompiles"] > 300
        assert len(text_ranges.cut(concatenated, 16, concatenated.stat().st_size)) == 16
    finally:
        sink.cleanup()


def test_small_file_is_one_piece(tmp_path):
    sink = StagingSink(tmp_path)
    assert text_ranges.parse_in_ranges(sink, FIXTURES[0], 8) is None   # far below MIN_RANGE_BYTES
    assert not sink.batches


def test_cuts_all_over(concatenated, tmp_path, monkeypatch):
    """One cut at a time, at 20 places spread over the file: at each, other processes' records are
    open, some go on after the cut with the same prefix, some end inside the next range."""
    one = stored_tables(tmp_path / "one" / "db.duckdb", [concatenated], 1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 1)
    size = concatenated.stat().st_size
    for i in range(1, 21):
        monkeypatch.setattr(text_ranges, "places", lambda size, parts, i=i: [size * i // 21])
        assert len(text_ranges.cut(concatenated, 2, size)) == 2
        assert stored_tables(tmp_path / f"r{i}" / "db.duckdb", [concatenated], 2) == one, f"cut {i}"


def test_worker_that_dies_leaves_one_piece(concatenated, tmp_path, monkeypatch):
    """A range's process that fails (here: out of memory in every worker) costs the split, not the
    file: it is parsed in one piece, with the same rows, and no range's staged rows are left."""
    one = stored_tables(tmp_path / "one" / "db.duckdb", [concatenated], 1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 4096)
    parent = os.getpid()
    real = text_ranges.parse_range

    def parse_range(path, rng, stage_dir):
        if os.getpid() != parent:
            raise MemoryError("worker out of memory")
        return real(path, rng, stage_dir)
    monkeypatch.setattr(text_ranges, "parse_range", parse_range)
    sink = StagingSink(tmp_path)
    try:
        assert text_ranges.parse_in_ranges(sink, concatenated, 4) is None
        assert not list(sink.dir.iterdir())
    finally:
        sink.cleanup()
    assert stored_tables(tmp_path / "ranged" / "db.duckdb", [concatenated], 4) == one


def test_summarize_in_ranges_counts_one_parse(concatenated, monkeypatch):
    """`summarize` parses a large log in ranges too, and counts exactly what one parse counts."""
    one = summarize([concatenated], workers=1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 4096)
    taken = []   # the ranges' own counts, put together: nothing is staged and read back
    real = SummarySink.append
    monkeypatch.setattr(SummarySink, "append", lambda self, part, *a, **k: (taken.append(part), real(self, part, *a, **k)))
    monkeypatch.setattr(StagingSink, "replay", None)
    assert summarize([concatenated], workers=3) == one
    assert len({id(p) for p in taken}) == 3 and one["recompiles"] > 300 and one["errors"] and one["error_samples"]


def test_summarize_in_ranges_samples_the_files_first_errors(concatenated, tmp_path, monkeypatch):
    """Lines cut short all through the log, more than summarize keeps samples of: the ranges' samples
    put together are the file's first errors, in its order, as one parse keeps them."""
    damaged = tmp_path / "torch_logs.txt"
    with open(concatenated, "rb") as src, open(damaged, "wb") as out:
        for i, line in enumerate(src):
            if i % 100 == 50:
                out.write(b"V1122 02:26:1 cut short by a crash\n")
            out.write(line)
    one = summarize([damaged], workers=1)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 4096)
    assert summarize([damaged], workers=8) == one
    assert one["errors"] > 2 * MAX_ERROR_SAMPLES and len(one["error_samples"]) == MAX_ERROR_SAMPLES
    second = text_ranges.cut(damaged, 8, damaged.stat().st_size)[1].start
    assert one["error_samples"][-1]["line"] > damaged.read_bytes()[:second].count(b"\n")   # past the first range


def test_replay_counts_the_errors_not_kept(tmp_path, monkeypatch):
    """A staged file keeps its first MAX_STORED_ERRORS errors and counts the rest by kind; ranges put
    together keep that count, and summarize is handed every error."""
    monkeypatch.setattr(StagingSink, "MAX_STORED_ERRORS", 3)

    class Errors:
        def __init__(self):
            self.kinds = []

        def row(self, table, row):
            pass

        def error(self, line_no, kind, message, excerpt=""):
            self.kinds.append(kind)

        def meta(self, key, value):
            pass
    whole = StagingSink(tmp_path)
    try:
        parts = [StagingSink(whole.dir) for _ in range(2)]
        for part, kinds in zip(parts, (["glog", "json"], ["glog", "json", "json", "binary"])):
            for kind in kinds:
                part.error(1, kind, "m")
            whole.append(part)
        got = Errors()
        whole.replay(got)
        assert len(whole.errors) == 3
        assert sorted(got.kinds) == sorted(["glog", "json", "glog", "json", "json", "binary"])
    finally:
        whole.cleanup()
