"""The collector's default TORCH_LOGS loses nothing the store can read, and a reduce-overhead job
collected with it on the CPU (sample_logs/scripts/cudagraphs/coverage_job.py --version skip, no
--logs flag) stores a CUDA-graph coverage of zero without an error: on the CPU torch skips CUDA
graphs silently, counting the skip (timings.json) without a reason in the log. The GPU bundles of
the same job are read by tests/app/test_cudagraph_defaults_gpu.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.collectors.torch_logs import DEFAULT_LOGS, PREVIOUS_DEFAULT_LOGS
from compilewatch.ingest.text.registry import PARSERS

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "sample_logs" / "scripts" / "cudagraphs" / "coverage_job.py"
PY = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
ENV.pop("TORCH_LOGS", None)   # the collector adds what the environment names to its own


def test_default_logs_name_every_component_a_parser_reads():
    read = {p.component for p in PARSERS if p.component}
    assert read == {"graph_breaks", "recompiles", "cudagraphs"}
    assert read <= set(DEFAULT_LOGS)
    assert set(PREVIOUS_DEFAULT_LOGS) <= set(DEFAULT_LOGS)      # and drops nothing logged before
    assert len(DEFAULT_LOGS) == len(set(DEFAULT_LOGS))


def test_the_hooks_watch_names_torch_still_has():
    """The replay count wraps two methods of torch's CUDA-graph tree manager; a torch that renamed
    either would leave the replay share unmeasured (None), never wrong. This torch has both."""
    pytest.importorskip("torch")
    from torch._inductor import cudagraph_trees

    from compilewatch.collectors import hooks
    for name in ("record_function", "execute_node"):
        assert callable(getattr(cudagraph_trees.CUDAGraphTreeManager, name))
    assert hooks._cudagraph_doc() is None            # nothing watched before a compile brought it in


@pytest.fixture(scope="module")
def cpu_bundle(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("defaults")
    proc = subprocess.run([PY, "-m", "compilewatch", "collect", "--model", "mlp-coverage", "--label", "skip",
                           "--out", str(out), "--", PY, str(JOB), "--version", "skip", "--steps", "6",
                           "--device", "cpu"], env=ENV, cwd=out, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    return bundle


@pytest.mark.slow
def test_a_cpu_reduce_overhead_job_with_the_defaults_has_zero_coverage(cpu_bundle, tmp_path):
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import run_detail
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.review.cudagraph_coverage import describe, run_coverages
    from compilewatch.store import open_store

    manifest = json.loads((cpu_bundle / "manifest.json").read_text())
    assert manifest["torch_logs_setting"] == ",".join(DEFAULT_LOGS) and "cudagraphs" in DEFAULT_LOGS
    timings = json.loads((cpu_bundle / "timings.json").read_text())
    counted = timings["dynamo_counters"]["inductor"]["cudagraph_skips"]
    assert counted >= 1 and timings["cudagraphs"] is None        # skipped, and no tree manager on the CPU

    store = open_store(tmp_path / "cw.duckdb")
    report = ingest_paths(store, [cpu_bundle])
    assert report.ok and not sum(f.errors for f in report.files)
    with store.read() as con:
        run_id = manifest["run_id"]
        (c,) = run_coverages(con, [run_id]).values()
        shown = run_detail.cudagraph_coverage(con, Filters(run_id=run_id))
    assert (c.graphs, c.partitions, c.skips, c.replay_share) == (0, 0, 0, None)
    assert describe(c) == "no CUDA graph"
    assert shown["skips_counted_by_torch"].iloc[0] == counted and shown["coverage"].iloc[0] == "no CUDA graph"

    check = subprocess.run([PY, "-m", "compilewatch", "check", str(cpu_bundle)], env=ENV, capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert "CUDA graphs: no CUDA graph" in check.stdout
    assert f"torch counted {counted} skip(s) the log gives no reason for" in check.stdout
