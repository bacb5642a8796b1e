"""GPU tests: the collector on a real CUDA job. Marked `gpu`; skipped where torch sees no CUDA device.

Run on the device machine with: python -m pytest -q -m gpu tests/collectors
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

REPO = Path(__file__).resolve().parents[2]
SLEEP_CYCLES = 20_000_000   # torch.cuda._sleep spins the GPU for this many cycles (~10 ms on H100/H200)

JOB = f"""
import torch
from compilewatch.collectors.hooks import step
m = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).cuda()
f = torch.compile(m)
x = torch.randn(64, 512, device="cuda")
for i in range(30):
    with step("sleep"):
        torch.cuda._sleep({SLEEP_CYCLES})
    f(x)
torch.cuda.synchronize()
"""


def _reference_sleep_ms() -> float:
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(SLEEP_CYCLES)
    times = []
    for _ in range(5):
        e0.record()
        torch.cuda._sleep(SLEEP_CYCLES)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    return sorted(times)[2]


def test_cuda_job_bundle_has_gpu_facts_and_honest_step_times(tmp_path):
    from compilewatch.collectors.collect import collect

    script = tmp_path / "job.py"
    script.write_text(JOB)
    res = collect([sys.executable, str(script)], tmp_path / "out", model="gpu-mlp", pythonpath=[str(REPO)], tee=False)
    assert res.exit_status == 0, (res.bundle / "torch_logs.txt").read_text()[-2000:]
    m = json.loads((res.bundle / "manifest.json").read_text())
    assert m["gpu_name"] and m["cuda_version"] and m["device"].startswith("cuda")
    t = json.loads((res.bundle / "timings.json").read_text())
    assert t["device"].startswith("cuda") and t["peak_mem_bytes"] > 0
    by_name = {c["name"]: c for c in t["callables"]}
    fwd = by_name["Sequential.forward"]
    assert fwd["steps"][0]["phase"] == "compile" and fwd["steps"][0]["peak_mem_bytes"] > 0
    assert fwd["steady_samples"] > 0
    # The marked step only holds a GPU sleep: its event-timed steady median must match the sleep's
    # own duration measured here (same GPU), within 15%.
    ref = _reference_sleep_ms()
    sleep = by_name["sleep"]
    assert sleep["steady_samples"] >= 20
    assert abs(sleep["steady_median_ms"] - ref) / ref < 0.15, (sleep["steady_median_ms"], ref)


def test_bench_on_cuda_writes_dynamo_csv_row(tmp_path):
    from compilewatch.collectors.bench import run_bench

    rows = run_bench(["mlp"], ["default"], task="infer", steps=10, warmup=2, device="cuda", out_dir=tmp_path, tee=False)
    assert rows[0]["exit_status"] == 0
    with open(tmp_path / "bench.csv", newline="") as f:
        row = next(csv.DictReader(f))
    assert row["dev"] == "cuda" and float(row["speedup"]) > 0
    assert float(row["eager_peak_mem"]) > 0 and float(row["dynamo_peak_mem"]) > 0
    assert int(row["unique_graphs"]) == 1 and int(row["graph_breaks"]) == 0
