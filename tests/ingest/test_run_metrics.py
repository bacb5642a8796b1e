"""Hardware and per-run metrics, derived at ingest from the real bundles in sample_logs/ (H200 with
torch 2.11; CPU with torch 2.13 and 2.14.1) and a loose real trace: each figure checked against
the bundle's own files, and the backfill of a store made before these columns existed."""
from __future__ import annotations

import csv
import io
import json
import statistics
import tarfile
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.reingest import reingest
from compilewatch.ingest.summary import summarize
from compilewatch.store import open_store
from compilewatch.store.run_metrics import METRICS, refresh_run_metrics

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "sample_logs/gpu-h200-torch2.11/resnet50_default_train_run1.tar.gz"
H200_COLLECT = REPO / "sample_logs/gpu-h200-torch2.11/resnet50_collect_example.tar.gz"
CPU_213 = REPO / "sample_logs/cpu-torch2.13/item_branch_default_infer.tar.gz"
CPU_214 = REPO / "sample_logs/cpu-torch2.14.1/item_branch_default_infer.tar.gz"
LOOSE = REPO / "tests/fixtures/trace/graph_break_recompile.log.gz"


def _member(archive: Path, name: str):
    with tarfile.open(archive) as tf:
        for m in tf.getmembers():
            if m.name.endswith("/" + name):
                return tf.extractfile(m).read()
    return None


def _run_id(archive: Path) -> str:
    return json.loads(_member(archive, "manifest.json"))["run_id"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("metrics") / "cw.duckdb")
    report = ingest_paths(store, [H200, H200_COLLECT, CPU_213, CPU_214, LOOSE])
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return store


def _metrics(store, run_id) -> dict:
    with store.read() as con:
        rows = con.execute("SELECT metric, subject, value, unit, direction, n, spread, source FROM run_metrics "
                           "WHERE run_id = ?", [run_id]).fetchall()
    return {(r[0], r[1]): r[2:] for r in rows}


def test_hardware_is_read_from_each_kind_of_input(db):
    with db.read() as con:
        hw = dict(con.execute("SELECT run_id, hardware FROM runs").fetchall())
        kinds = dict(con.execute("SELECT run_id, device_kind FROM runs").fetchall())
    assert hw[_run_id(H200)] == "NVIDIA H200 ×1" and kinds[_run_id(H200)] == "cuda"
    assert hw[_run_id(H200_COLLECT)] == "NVIDIA H200 ×1"
    # the two CPU folders ran on the same 2-vCPU machine: one hardware value, not the GPU's
    assert hw[_run_id(CPU_213)] == hw[_run_id(CPU_214)] == "CPU ×1" and kinds[_run_id(CPU_213)] == "cpu"
    loose = [r for r in hw if r.startswith("loose-")]
    assert len(loose) == 1 and hw[loose[0]] == "unknown" and kinds[loose[0]] == "unknown"


def test_bench_metrics_are_the_bench_csv(db):
    row = next(csv.DictReader(io.StringIO(_member(H200, "bench.csv").decode())))
    m = _metrics(db, _run_id(H200))
    subject = f"{row['name']}/{row['task']}/{row['mode']}"
    assert m[("speedup", subject)][:3] == (pytest.approx(float(row["speedup"])), "x", "higher")
    assert m[("compilation_latency", subject)][0] == pytest.approx(float(row["compilation_latency"]))
    assert m[("compression_ratio", subject)][0] == pytest.approx(float(row["compression_ratio"]))
    lat = m[("latency", subject)]
    assert lat[0] == pytest.approx(float(row["abs_latency"])) and lat[4] == pytest.approx(float(row["compiled_spread"]))


def test_hook_metrics_are_the_timings(db):
    t = json.loads(_member(H200_COLLECT, "timings.json"))
    m = _metrics(db, _run_id(H200_COLLECT))
    for c in t["callables"]:
        if c["mode"] != "compiled" or not c.get("steady_samples"):
            continue
        value, unit, direction, n, spread, source = m[("step_time", c["name"])]
        steady = [s["duration_ms"] for s in c["steps"] if s["phase"] == "steady"]
        assert value == pytest.approx(statistics.median(steady), rel=1e-6) and n == len(steady)
        assert (unit, direction, source) == ("ms", "lower", "hooks")
    compile_s = sum(s["duration_ms"] for c in t["callables"] if c["mode"] == "compiled"
                    for s in c["steps"] if s["phase"] == "compile") / 1e3
    assert m[("hook_compile_time", "")][0] == pytest.approx(compile_s, rel=1e-6)
    assert m[("peak_memory", "")][0] == t["peak_mem_bytes"]


@pytest.mark.parametrize("archive", [H200, CPU_213, CPU_214, LOOSE], ids=["h200", "cpu213", "cpu214", "loose"])
def test_log_metrics_match_summarize(db, archive, tmp_path):
    s = summarize([archive])
    if archive is LOOSE:
        with db.read() as con:
            (rid,) = con.execute("SELECT run_id FROM runs WHERE run_id LIKE 'loose-%'").fetchone()
    else:
        rid = _run_id(archive)
    m = _metrics(db, rid)
    assert m[("graph_breaks", "")][0] == s["graph_breaks"]
    assert m[("distinct_graph_breaks", "")][0] == s["unique_graph_breaks"]
    assert m[("recompiles", "")][0] == s["recompiles"]
    assert m[("limit_hits", "")][0] == s["limit_hits"]
    assert m[("failures", "")][0] == s["failures"]
    assert m[("compile_time", "")][0] > 0 and m[("compile_time", "")][1:3] == ("s", "lower")


def test_every_row_carries_its_metrics_declared_unit_and_direction(db):
    with db.read() as con:
        rows = con.execute("SELECT DISTINCT metric, unit, direction, source FROM run_metrics").fetchall()
    declared = {m.name: (m.unit, m.direction, m.source) for m in METRICS}
    assert {r[0]: r[1:] for r in rows} == {name: declared[name] for name, *_ in rows}
    # all but the iteration period, the time to the first step and the host probe (these bundles
    # predate them) come out of these five inputs (tests/collectors/test_compile_total.py makes a run
    # with the first two), and CUDA-graph coverage, written only for runs that used CUDA graphs (none
    # of these did; the reduce-overhead bundles are in tests/ingest/test_cudagraph_coverage.py)
    coverage = {"cudagraph_graphs", "cudagraph_partitions", "cudagraph_rerecords", "cudagraph_replay_share"}
    assert {r[0] for r in rows} == set(declared) - {"iteration_time", "time_to_first_step", "host_probe"} - coverage


def test_one_refresh_for_all_equals_per_run_refreshes(db):
    with db.read() as con:
        before = sorted(con.execute("SELECT * FROM run_metrics").fetchall(), key=repr)
    with db.write() as con:
        con.execute("BEGIN")
        refresh_run_metrics(con)
        after = sorted(con.execute("SELECT * FROM run_metrics").fetchall(), key=repr)
        con.execute("ROLLBACK")
    assert after == before and len(before) > 40


def test_a_refresh_for_all_in_slices_of_one_run_equals_per_run_refreshes(db, monkeypatch):
    """A rebuild of every run sums a slice of runs per statement (store/run_filter.py), so a
    team-year store's medians fit in memory instead of spilling; with one run per slice every run
    still gets its rows once."""
    from compilewatch.store import run_filter, run_metrics
    with db.read() as con:
        before = sorted(con.execute("SELECT * FROM run_metrics").fetchall(), key=repr)
        runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    monkeypatch.setattr(run_filter, "RUNS_PER_STATEMENT", 1)
    sliced = []
    monkeypatch.setattr(run_metrics, "run_slices", lambda con: sliced.extend(run_filter.run_slices(con)) or sliced)
    with db.write() as con:
        con.execute("BEGIN")
        refresh_run_metrics(con)
        after = sorted(con.execute("SELECT * FROM run_metrics").fetchall(), key=repr)
        con.execute("ROLLBACK")
    assert len(sliced) == runs > 1   # one statement per run
    assert after == before and len(before) > 40


def test_a_store_from_before_is_backfilled_on_migration_and_by_reingest(tmp_path):
    """Make a schema-1 store holding real runs, then open it with this version."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [H200_COLLECT, CPU_213]).ok
    with store.write() as con:       # back to schema 1: drop what migrations 002, 007, 019, 023 and 025 added
        for stmt in ("DROP TABLE run_metrics", "DROP TABLE timing_summaries", "DROP TABLE cudagraph_events",
                     "DROP TABLE run_settings", "DROP TABLE host_probes",
                     "DELETE FROM _migrations WHERE name = '019_run_settings.sql'",
                     "DELETE FROM _migrations WHERE name = '007_cudagraphs.sql'",
                     "DELETE FROM _migrations WHERE name = '023_cudagraph_coverage.sql'",
                     "DELETE FROM _migrations WHERE name = '025_peak_heap.sql'",
                     "ALTER TABLE step_timings DROP COLUMN rank",
                     *(f"ALTER TABLE runs DROP COLUMN {c}" for c in ("device_kind", "world_size", "cpu_model", "hardware")),
                     "DELETE FROM _migrations WHERE name = '002_run_metrics.sql'",
                     # and what 018 added (a schema-1 store predates it: its backfill writes the metrics)
                     "DROP TABLE later_compile_metrics",
                     *(f"ALTER TABLE {t} DROP COLUMN {c}" for t in ("rollup_compile_time", "rollup_day_compile_time",
                                                                     "rollup_month_compile_time")
                       for c in ("forward_s", "backward_s", "runtime_autotune_s")),
                     "DELETE FROM _migrations WHERE name = '018_compile_total.sql'",
                     "UPDATE files SET parser_version = 1"):
            con.execute(stmt)
        forward_only = con.execute("SELECT sum(entire_frame_compile_time_s) FROM compiles JOIN runs USING (run_id) "
                                   "WHERE model = 'resnet50'").fetchone()[0]
    store = open_store(tmp_path / "cw.duckdb")
    with store.read() as con:
        hw = sorted(r[0] for r in con.execute("SELECT hardware FROM runs").fetchall())
        metrics = dict(con.execute("SELECT metric, count(*) FROM run_metrics GROUP BY metric").fetchall())
        summaries = con.execute("SELECT count(*) FROM timing_summaries").fetchone()[0]
    assert hw == ["CPU ×1", "NVIDIA H200 ×1"]
    assert metrics["step_time"] >= 2 and metrics["graph_breaks"] == 2 and metrics["speedup"] == 1
    assert summaries == 0                       # the raw timings are re-read by reingest, not by SQL
    # until reingest, a stored run's compile time counts its forward compiles alone
    assert _compile_time(store, "resnet50") == pytest.approx(forward_only)
    assert reingest(store) > 0
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM timing_summaries").fetchone()[0] == 2
        after = dict(con.execute("SELECT metric, count(*) FROM run_metrics GROUP BY metric").fetchall())
        backward = con.execute("SELECT sum(backward_compile_time_s) FROM later_compile_metrics").fetchone()[0]
    assert after == metrics
    # reingest parses the backward compile (the training job's bwd_compilation_metrics) into it
    assert backward > 0 and _compile_time(store, "resnet50") > forward_only + backward * 0.999


def _compile_time(store, model: str) -> float:
    with store.read() as con:
        return con.execute("SELECT value FROM run_metrics JOIN runs USING (run_id) WHERE model = ? "
                           "AND metric = 'compile_time'", [model]).fetchone()[0]


def test_world_size_of_a_two_rank_job_is_part_of_its_hardware(tmp_path):
    """A real 2-rank torchrun bundle from before the collector wrote world_size: two timings files
    and two trace ranks say so."""
    bundle = REPO / "tests/fixtures/ranks/ddp_same.tar.gz"
    if not bundle.exists():
        pytest.skip("no multi-rank fixture")
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [bundle]).ok
    with store.read() as con:
        assert con.execute("SELECT hardware, world_size FROM runs").fetchall() == [("CPU ×2", 2)]
        # compile time is the slowest rank's (forward + backward + runtime autotuning), not the two
        # ranks added up
        per_rank = con.execute("""
            SELECT max(s), sum(s), min(bwd) FROM (
                SELECT rank, sum(s) AS s, sum(bwd) AS bwd FROM (
                    SELECT rank, entire_frame_compile_time_s AS s, 0 AS bwd FROM compiles
                    UNION ALL SELECT rank, coalesce(backward_compile_time_s, 0) + coalesce(runtime_autotune_time_s, 0),
                                     backward_compile_time_s FROM later_compile_metrics)
                GROUP BY rank)""").fetchone()
        assert per_rank[2] > 0            # each rank compiled a backward
        (value,) = con.execute("SELECT value FROM run_metrics WHERE metric = 'compile_time'").fetchone()
    assert value == pytest.approx(per_rank[0]) and value < per_rank[1]
