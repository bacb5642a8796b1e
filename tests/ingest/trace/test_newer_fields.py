"""compilation_metrics fields and trace records of PyTorch 2.10-2.13, each on a real log that
carries it: tlparse's multi-rank runtime log (a torch 2.10-era trace from pytorch/tlparse's tests,
../shared/public_logs/tlparse), and runs made with `compilewatch collect` (sample_logs/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[3]
RUNTIME_LOG = "tlparse__inputs__multi_rank_runtime__dedicated_log_torch_trace_rank_3.log"
H100 = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs" / "tiny-lm-ro_changed_run1.tar.gz"
CPU_213 = REPO / "sample_logs" / "cpu-torch2.13-versions" / "tiny-job_v2_run1.tar.gz"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    from tests.conftest import PUBLIC_LOGS
    paths = [H100, CPU_213]
    if (PUBLIC_LOGS / RUNTIME_LOG).exists():
        paths.append(PUBLIC_LOGS / RUNTIME_LOG)
    store = open_store(tmp_path_factory.mktemp("fields") / "cw.duckdb")
    assert ingest_paths(store, paths, model="runtime-log").ok
    with store.read() as c:
        yield c


def _raw_metrics(c, run_like: str):
    return [json.loads(r[0]) for r in c.execute(
        "SELECT metrics_json FROM compiles JOIN runs USING (run_id) WHERE runs.model = ?", [run_like]).fetchall()]


def test_guard_latency_and_graph_breaks_per_compile(con):
    for model in ("tiny-lm-ro", "runtime-log"):
        rows = con.execute("SELECT guard_latency_us, num_graph_breaks, metrics_json FROM compiles JOIN runs USING (run_id) "
                           "WHERE runs.model = ?", [model]).fetchall()
        if not rows:
            pytest.skip(f"no {model} run (public logs absent)")
        with_latency = [(lat, json.loads(m)["guard_latency_us"]) for lat, _, m in rows
                        if json.loads(m).get("guard_latency_us") is not None]
        assert with_latency and all(a == pytest.approx(b) for a, b in with_latency), model
        breaks = [(n, json.loads(m).get("num_graph_breaks")) for _, n, m in rows]
        assert any(b is not None for _, b in breaks) and all(n == b for n, b in breaks), model


def test_recompile_reason_is_a_column(con):
    reasons = [r[0] for r in con.execute("SELECT recompile_reason FROM compiles JOIN runs USING (run_id) "
                                         "WHERE runs.model = 'tiny-lm-ro' AND recompile_reason IS NOT NULL").fetchall()]
    assert any("size mismatch at index 1" in r for r in reasons), reasons


def test_microsecond_phases_agree_with_the_seconds_fields(con):
    # Where torch writes both, the _us twin the parser falls back to is the same phase.
    for m in _raw_metrics(con, "tiny-lm-ro"):
        if m.get("entire_frame_compile_time_s") and m.get("dynamo_cumulative_compile_time_us"):
            assert m["dynamo_cumulative_compile_time_us"] / 1e6 == pytest.approx(m["entire_frame_compile_time_s"], rel=0.05)
            break
    else:
        pytest.fail("no record with both fields")


def test_backward_and_runtime_metrics_are_kept_per_compile_id(con):
    kinds = dict(con.execute("SELECT kind, count(*) FROM artifacts JOIN runs USING (run_id) "
                             "WHERE runs.model = 'tiny-lm-ro' GROUP BY kind").fetchall())
    assert kinds.get("bwd_compilation_metrics", 0) > 0
    assert kinds.get("bwd_compilation_metrics_runtime", 0) > 0 or kinds.get("compilation_metrics_runtime", 0) > 0
    runtime = con.execute("SELECT count(*) FROM artifacts JOIN runs USING (run_id) WHERE runs.model = 'runtime-log' "
                          "AND kind = 'compilation_metrics_runtime'").fetchall()[0][0]
    if con.execute("SELECT count(*) FROM runs WHERE model = 'runtime-log'").fetchall()[0][0]:
        assert runtime > 0


def test_the_torch_version_artifact_names_the_build(con):
    # torch 2.13 writes a torch_version artifact ({"pytorch_version": "2.13.0+cpu", "commit": ...})
    assert con.execute("SELECT torch_version FROM runs WHERE model = 'tiny-job'").fetchall() == [("2.13.0+cpu",)]
    kinds = [r[0] for r in con.execute("SELECT name FROM artifacts JOIN runs USING (run_id) "
                                       "WHERE runs.model = 'tiny-job' AND name = 'torch_version'").fetchall()]
    assert kinds == ["torch_version"]
