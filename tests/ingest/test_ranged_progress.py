"""Long work shows real progress: an ingest that parses one large log in byte ranges on several
processes reports the bytes parsed so far while the ranges are parsed, not 0 until the end. The
logs are real ones repeated to size (benchmarks/real_inputs.py, as the ingest benchmark builds its
input); ranges are made smaller than MIN_RANGE_BYTES so a few MB split into several."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compilewatch.ingest import text_ranges, trace_ranges
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import real_inputs  # noqa: E402


def _progress_of(tmp_path, log: Path) -> list[tuple[int, int]]:
    seen = []
    report = ingest_paths(open_store(tmp_path / "db" / "cw.duckdb"), [log], workers=3,
                          progress=lambda done, total, name: seen.append((done, total)))
    assert report.ok and report.files[0].status in ("stored", "partial"), report.files[0].message
    return seen


def _assert_real_progress(seen, size):
    done = [d for d, _ in seen]
    assert all(t == size for _, t in seen)
    assert done == sorted(done), done                          # it only moves forward
    during = sorted({d for d in done if 0 < d < size})
    assert len(during) >= 3, done                              # it moved while the ranges were parsed
    assert done[-1] == size


def test_text_log_in_ranges_reports_bytes_as_they_are_parsed(tmp_path, monkeypatch):
    log = tmp_path / "torch_logs.txt"
    size = real_inputs.build(real_inputs.text_sources(), 12, log)
    monkeypatch.setattr(text_ranges, "MIN_RANGE_BYTES", 3 << 20)
    parsed_in = []
    real = text_ranges.parse_in_ranges
    monkeypatch.setattr(text_ranges, "parse_in_ranges",
                        lambda *a, **k: parsed_in.append(real(*a, **k)) or parsed_in[-1])
    _assert_real_progress(_progress_of(tmp_path, log), size)
    assert parsed_in and parsed_in[0] is not None               # it was parsed in ranges


def test_trace_in_ranges_reports_bytes_as_they_are_parsed(tmp_path, monkeypatch):
    log = tmp_path / "trace.log"
    size = real_inputs.build(real_inputs.trace_sources(), 12, log)
    monkeypatch.setattr(trace_ranges, "MIN_RANGE_BYTES", 2 << 20)
    monkeypatch.setattr(trace_ranges, "RANGE_BYTES", 4 << 20)
    _assert_real_progress(_progress_of(tmp_path, log), size)


def test_files_parsed_by_workers_report_bytes_before_each_is_done(tmp_path):
    """Several large files parsed by a pool of workers (ingest/workers.py): the bar moves within a
    file, not only when one is written."""
    sizes = [real_inputs.build(real_inputs.text_sources(), mb, tmp_path / "in" / f"torch_logs_{mb}.txt")
             for mb in (16, 17, 18)]
    seen = []
    report = ingest_paths(open_store(tmp_path / "db" / "cw.duckdb"), sorted((tmp_path / "in").iterdir()), workers=2,
                          progress=lambda done, total, name: seen.append(done))
    assert report.ok and len(report.files) == 3
    assert seen == sorted(seen) and seen[-1] == sum(sizes)
    file_ends = {0, sizes[0], sizes[0] + sizes[1], sum(sizes)}
    assert set(seen) - file_ends, seen   # some bytes reported while a file was still being parsed
