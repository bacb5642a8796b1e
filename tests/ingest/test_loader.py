"""The loader: dedupe, bundles and archives, bad input kept and counted, crash safety."""
from __future__ import annotations

import json
import tarfile
import zipfile

import pytest

from compilewatch.ingest import parsing, staging
from compilewatch.ingest.bundle import Manifest, write_manifest
from compilewatch.ingest.loader import ingest_paths

BENCH = "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,dynamo_peak_mem,graph_breaks,unique_graphs\n" \
        "cuda,resnet50,32,1.31,10.5,41.2,0.98,3.1,3.2,0,1\n"
TIMINGS = {"format_version": 1, "device": "cpu", "callables": [
    {"name": "Model.forward", "mode": "compiled", "first_call_ms": 900.0,
     "steps": [{"step": 0, "phase": "compile", "duration_ms": 900.0},
               {"step": 1, "phase": "warmup", "duration_ms": 3.0},
               {"step": 2, "phase": "steady", "duration_ms": 2.5}]}]}


def _count(store, table):
    with store.read() as con:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _bundle(tmp_path, run_id="run-1"):
    b = tmp_path / run_id
    b.mkdir()
    (b / "bench.csv").write_text(BENCH)
    (b / "timings.json").write_text(json.dumps(TIMINGS))
    write_manifest(b, Manifest(run_id=run_id, model="resnet50", label="main@abc", torch_version="2.11.0",
                               started_at="2026-11-20T10:00:00Z", ended_at="2026-11-20T10:05:00Z", exit_status=0,
                               end_reason="exited", gpu_name="NVIDIA H100", command=["python", "train.py"]))
    return b


def test_same_file_twice_adds_nothing(store, tmp_path):
    f = tmp_path / "bench.csv"
    f.write_text(BENCH)
    first = ingest_paths(store, [f])
    assert [r.status for r in first.files] == ["stored"]
    assert first.files[0].records == {"bench_results": 1}
    second = ingest_paths(store, [f])
    assert [r.status for r in second.files] == ["duplicate"]
    assert _count(store, "bench_results") == 1 and _count(store, "files") == 1


def test_bundle_dir_tar_and_zip(store, tmp_path):
    b = _bundle(tmp_path)
    rep = ingest_paths(store, [b])
    assert {r.status for r in rep.files} == {"stored"}, rep.files
    with store.read() as con:
        run = con.execute("SELECT model, label, torch_version, gpu_name, exit_status, end_reason, command, started_at::VARCHAR FROM runs").fetchone()
        steps = con.execute("SELECT phase, duration_ms FROM step_timings ORDER BY step").fetchall()
    assert run == ("resnet50", "main@abc", "2.11.0", "NVIDIA H100", 0, "exited", "python train.py", "2026-11-20 10:00:00")
    assert steps == [("compile", 900.0), ("warmup", 3.0), ("steady", 2.5)]

    (tmp_path / "t").mkdir()
    b2 = _bundle(tmp_path / "t", "run-2")
    tgz = tmp_path / "run-2.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(b2, arcname="run-2")
    rep = ingest_paths(store, [tgz])
    assert {r.status for r in rep.files} == {"stored"}, rep.files
    # The same files again, zipped: every one is recognised.
    z = tmp_path / "again.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for p in b2.iterdir():
            zf.write(p, f"run-2/{p.name}")
    assert {r.status for r in ingest_paths(store, [z]).files} == {"duplicate"}
    assert _count(store, "runs") == 2


def test_zip_that_escapes_is_refused_with_a_reason(store, tmp_path):
    z = tmp_path / "evil.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("../../etc/evil.txt", "x")
    rep = ingest_paths(store, [z])
    assert rep.files[0].status == "failed" and "escapes" in rep.files[0].message
    assert _count(store, "files") == 0


def test_bad_csv_row_is_counted_with_its_line_and_the_rest_lands(store, tmp_path):
    f = tmp_path / "b.csv"
    f.write_text(BENCH + "cuda,vit,abc,1.1,2\ncuda,bert,8,1.2,3.0,1,1,1,1,0,1\n")
    rep = ingest_paths(store, [f])
    assert rep.files[0].status == "partial" and rep.files[0].errors == 1
    with store.read() as con:
        assert con.execute("SELECT line_no FROM ingest_errors").fetchone()[0] == 3
    assert _count(store, "bench_results") == 2


def test_strict_stores_nothing_of_a_file_with_errors(store, tmp_path):
    f = tmp_path / "b.csv"
    f.write_text(BENCH + "cuda,vit,abc,1.1,2\n")
    rep = ingest_paths(store, [f], strict=True)
    assert rep.files[0].status == "failed" and "--strict" in rep.files[0].message
    assert _count(store, "bench_results") == 0 and _count(store, "files") == 0


def test_crash_mid_file_stores_nothing_and_a_retry_stores_once(store, tmp_path, monkeypatch):
    f = tmp_path / "big.csv"
    f.write_text("dev,name,batch_size,speedup,abs_latency\n" + "".join(f"cuda,m{i},1,1.1,1\n" for i in range(50_000)))
    real = parsing.reader_for

    def crashing(kind):
        parse = real(kind)

        def run(stream, sink):
            parse(stream, sink)          # >= one batch flushed into the open transaction
            raise KeyboardInterrupt
        return run
    monkeypatch.setattr(parsing, "reader_for", crashing)
    with pytest.raises(KeyboardInterrupt):
        ingest_paths(store, [f])
    assert _count(store, "bench_results") == 0 and _count(store, "files") == 0
    monkeypatch.setattr(parsing, "reader_for", real)
    assert ingest_paths(store, [f]).files[0].status == "stored"
    assert _count(store, "bench_results") == 50_000


def test_missing_path_is_a_failed_result_not_an_exception(store, tmp_path):
    rep = ingest_paths(store, [tmp_path / "nope.log"])
    assert rep.files[0].status == "failed" and "no such file" in rep.files[0].message
    assert rep.bad_input == rep.files


def test_crash_inside_the_database_transaction_rolls_back(store, tmp_path, monkeypatch):
    f = tmp_path / "b.csv"
    f.write_text(BENCH)
    real_load = staging.StagingSink.load

    def load_then_die(self, con, *a):
        real_load(self, con, *a)     # rows are in the open transaction now
        raise KeyboardInterrupt
    monkeypatch.setattr(staging.StagingSink, "load", load_then_die)
    with pytest.raises(KeyboardInterrupt):
        ingest_paths(store, [f])
    assert _count(store, "bench_results") == 0 and _count(store, "files") == 0 and _count(store, "runs") == 0
    assert list(store.tmp_dir.iterdir()) == []


def test_reingest_replaces_a_files_rows_once(store, tmp_path):
    from compilewatch.ingest.reingest import reingest
    f = tmp_path / "b.csv"
    f.write_text(BENCH)
    ingest_paths(store, [f])
    assert reingest(store, all_files=True) == 1
    assert _count(store, "bench_results") == 1 and _count(store, "files") == 1


def test_bundle_text_beside_a_trace_is_kept_but_not_counted_twice(store, tmp_path):
    import shutil
    from pathlib import Path
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    b = tmp_path / "both"
    (b / "trace").mkdir(parents=True)
    shutil.copy(fixtures / "trace" / "graph_break_recompile.log.gz", b / "trace" / "rank0.log.gz")
    shutil.copy(fixtures / "text" / "torch2.13_all.log", b / "torch_logs.txt")
    write_manifest(b, Manifest(run_id="both", model="toy"))
    rep = {r.name.split("/")[-1]: r for r in ingest_paths(store, [b]).files}
    assert rep["torch_logs.txt"].status == "stored" and rep["torch_logs.txt"].records == {}
    assert "TORCH_TRACE" in rep["torch_logs.txt"].message
    with store.read() as con:
        n = con.execute("SELECT count(*) FROM graph_breaks WHERE source = 'text'").fetchall()[0][0]
        kinds = sorted(r[0] for r in con.execute("SELECT kind FROM files").fetchall())
    assert n == 0 and rep["rank0.log.gz"].records.get("graph_breaks", 0) > 0
    assert kinds == ["manifest", "torch_logs", "torch_trace"]
    # and a re-parse by a later parser version keeps to the same rule
    from compilewatch.ingest.reingest import reingest
    with store.read() as con:
        before = con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0]
    assert reingest(store, all_files=True) == 3     # the manifest too: its host probe has a reader
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0] == before
        assert con.execute("SELECT count(*) FROM graph_breaks WHERE source = 'text'").fetchall()[0][0] == 0


def test_progress_reports_within_a_large_text_log(store, tmp_path):
    from pathlib import Path
    real = (Path(__file__).resolve().parents[1] / "fixtures" / "text" / "torch2.13_recompiles.log").read_bytes()
    big = tmp_path / "big.log"
    big.write_bytes(real * (3_000_000 // len(real) + 1))
    seen = []
    ingest_paths(store, [big], progress=lambda done, total, name: seen.append((done, total)))
    total = big.stat().st_size
    assert seen[-1] == (total, total)
    inside = [d for d, _ in seen if 0 < d < total]
    assert len(inside) >= 2 and inside == sorted(inside)


def test_one_corrupt_bundle_in_a_folder_fails_alone(store, tmp_path):
    folder = tmp_path / "inbox-copy"
    folder.mkdir()
    _bundle(folder, "good-run")
    (folder / "cut-short.tar.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    bad = folder / "bad-manifest"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    rep = ingest_paths(store, [folder])
    by_status = {}
    for r in rep.files:
        by_status.setdefault(r.status, []).append(r.name)
    assert sorted(by_status["failed"]) == ["inbox-copy/bad-manifest", "inbox-copy/cut-short.tar.gz"]
    assert len(by_status["stored"]) == 3   # good-run: manifest, bench.csv, timings.json
    assert _count(store, "runs") == 1


def test_a_staged_value_of_the_wrong_type_is_coerced_and_the_file_stored_once(tmp_path, monkeypatch):
    """A parser that hands a graph break's line number as text (a parser bug) makes the batch's
    INSERT fail, which ends the file's transaction: the batch is coerced on disk and the whole
    transaction runs again, storing every row once, the bad value as null."""
    from pathlib import Path

    from compilewatch.store import open_store

    log = Path(__file__).resolve().parents[1] / "fixtures" / "text" / "issue107865_torch2.1dev_rank_oldprefix_graph_break.log"
    clean = open_store(tmp_path / "clean" / "cw.duckdb")
    assert ingest_paths(clean, [log]).ok
    row = staging.StagingSink.row
    spoiled = []

    def wrong_type(self, table, values):
        if table == "graph_breaks" and not spoiled:
            spoiled.append(values["line_no"])
            values = {**values, "line_no": "line seventeen"}
        row(self, table, values)
    monkeypatch.setattr(staging.StagingSink, "row", wrong_type)
    store = open_store(tmp_path / "spoiled" / "cw.duckdb")
    report = ingest_paths(store, [log])
    assert report.ok, [(r.status, r.message) for r in report.files]
    assert spoiled and _count(store, "files") == 1
    cols = "line_no, gb_type, reason, compile_id"
    with clean.read() as a, store.read() as b:
        want = a.execute(f"SELECT {cols} FROM graph_breaks ORDER BY line_no").fetchall()
        got = b.execute(f"SELECT {cols} FROM graph_breaks ORDER BY line_no NULLS FIRST").fetchall()
    assert got[0][0] is None and [r for r in want if r[0] == spoiled[0]][0][1:] == got[0][1:]
    assert sorted(got[1:]) == sorted(r for r in want if r[0] != spoiled[0])
