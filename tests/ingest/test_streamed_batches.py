"""Rows loaded in bounded batches, and files parsed in worker processes, are the rows of the plain
path: the same real logs ingested three ways give identical tables.

- one batch per table (a batch bound larger than any staged table): what ingest did before batches;
- many small batches per table (a 4 KiB bound, so a table's rows span tens of INSERTs);
- two parse worker processes with the one writer (ingest/workers.py), default batches.
"""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from stored_tables import read_back

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.parsing import parse_into
from compilewatch.ingest.records import EVENT_TABLES
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.units import Unit
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "deep_dive.log.gz"
TEXT = REPO / "tests" / "fixtures" / "text" / "torch2.13_all.log"
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
SMALL = 4096


def _logs(tmp_path: Path) -> list[Path]:
    """Real logs in one folder: a trace rich in artifacts (plain, so every byte is read through the
    batches), a TORCH_LOGS text log, and collector bundles (traces, text, timings, manifests)."""
    d = tmp_path / "logs"
    d.mkdir()
    (d / "deep_dive.log").write_bytes(gzip.decompress(TRACE.read_bytes()))
    shutil.copy(TEXT, d / TEXT.name)
    for b in BUNDLES:
        shutil.copy(b, d / b.name)
    return [d]


def _tables(store) -> dict[str, list[tuple]]:
    """Every stored row of every table the ingest writes, in a stable order. Files are keyed by
    content (sha256), not by the file id the store handed out."""
    out = {}
    with store.read() as con:
        sha = dict(con.execute("SELECT file_id, sha256 FROM files").fetchall())
        for t in (*EVENT_TABLES, "ingest_errors"):
            cols = [c for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [t]).fetchall()]
            rows = read_back(cols, con.execute(f"SELECT {', '.join(cols)} FROM {t}").fetchall())
            fid = cols.index("file_id")
            out[t] = sorted((tuple(sha[v] if i == fid else v for i, v in enumerate(r)) for r in rows), key=repr)
        out["files"] = sorted(con.execute(
            "SELECT run_id, sha256, size_bytes, kind, original_name, status, records, errors FROM files").fetchall())
        out["runs"] = sorted(con.execute("SELECT run_id, model, label, torch_version, source FROM runs").fetchall(),
                             key=repr)
    return out


def _ingest(tmp_path, name, logs, monkeypatch, *, batch_bytes=None, workers=1):
    with monkeypatch.context() as m:
        if batch_bytes is not None:
            m.setattr(StagingSink, "BATCH_BYTES", batch_bytes)
        store = open_store(tmp_path / name / "cw.duckdb")
        report = ingest_paths(store, logs, workers=workers)
    return report, _tables(store)


def test_a_small_bound_splits_a_real_trace_into_many_batches(tmp_path):
    sink = StagingSink(tmp_path, batch_bytes=SMALL)
    try:
        parse_into(sink, Unit(TRACE, TRACE.name), detect.TORCH_TRACE, detect.sniff(TRACE))
        sink.finish()
        assert len(sink.batches["artifacts"]) > 10 and len(sink.batches["compile_phases"]) > 1
        assert all((sink.dir / n).stat().st_size < SMALL + 2_000_000 for n in sink.batches["compile_phases"])
    finally:
        sink.cleanup()


def test_batched_streamed_and_worker_ingests_store_identical_rows(tmp_path, monkeypatch, pool_for_small_inputs):
    if not BUNDLES:
        pytest.skip("sample_logs/cpu-torch2.13 has no bundles")
    logs = _logs(tmp_path)
    one_rep, one = _ingest(tmp_path, "one-batch", logs, monkeypatch, batch_bytes=1 << 40)
    many_rep, many = _ingest(tmp_path, "many-batches", logs, monkeypatch, batch_bytes=SMALL)
    work_rep, workers = _ingest(tmp_path, "workers", logs, monkeypatch, workers=2)

    assert one["artifacts"] and one["compile_phases"] and one["graph_breaks"] and one["step_timings"]
    for t in one:
        assert many[t] == one[t], f"{t}: small batches stored other rows"
        assert workers[t] == one[t], f"{t}: the worker ingest stored other rows"
    as_table = [[(f.name, f.kind, f.status, f.records, f.errors, f.message) for f in r.files]
                for r in (one_rep, many_rep, work_rep)]
    assert as_table[0] == as_table[1] == as_table[2]


def test_workers_keep_the_duplicate_rules(tmp_path, pool_for_small_inputs):
    """The same content twice in one ingest, and again in a second one, with two workers: stored
    once, then duplicates, exactly as one process reports it."""
    d = tmp_path / "twice"
    d.mkdir()
    shutil.copy(TEXT, d / "a.log")
    shutil.copy(TEXT, d / "b.log")
    shutil.copy(BUNDLES[0], d / BUNDLES[0].name)
    reports = {}
    for workers in (1, 2):
        store = open_store(tmp_path / f"w{workers}" / "cw.duckdb")
        first = ingest_paths(store, [d], workers=workers)
        second = ingest_paths(store, [d], workers=workers)
        reports[workers] = [[(f.name, f.status, f.run_id, f.message) for f in r.files] for r in (first, second)]
    assert [s for _, s, _, _ in reports[1][0]].count("duplicate") == 1
    assert all(s == "duplicate" for _, s, _, _ in reports[1][1])
    assert reports[2] == reports[1]


def test_cli_refuses_fewer_than_one_worker(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "compilewatch", "ingest", str(TEXT), "--workers", "0",
                        "--db", str(tmp_path / "s" / "cw.duckdb")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--workers must be 1 or more" in r.stderr
    assert not (tmp_path / "s").exists()
