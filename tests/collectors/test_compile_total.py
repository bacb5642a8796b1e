"""Compile time and the time to the first step, checked against a real training job's own clock.

`compilewatch collect` wraps a small CPU training script (an MLP compiled with inductor, forward,
backward and an optimizer step) that prints the seconds from its first line to the end of its first
step. AOTAutograd compiles the backward lazily at the first backward call on torch 2.13 (the trace's
bwd_compilation_metrics starts after the forward's compile ended), so a compile time of the
forward alone misses a large part of what the script waited for."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.store import open_store  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}

# The script reads its clock on its first line and once its first optimizer step has returned.
JOB = """
import time
T0 = time.time()
import json
import torch

torch.manual_seed(0)
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(3):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if i == 0:
        print(json.dumps({"first_step_s": time.time() - T0}), flush=True)
"""


# No optimizer: the first step is the first call of the compiled model (the one called most often).
INFERENCE_JOB = """
import time
T0 = time.time()
import json
import torch

helper = torch.compile(lambda t: t * 2, backend="eager")
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU()), backend="eager")
helper(torch.ones(2))
for i in range(4):
    with torch.no_grad():
        model(torch.randn(16, 32))
    if i == 0:
        print(json.dumps({"first_step_s": time.time() - T0}), flush=True)
"""


def _collect(tmp: Path, job: str, env: dict) -> tuple[float, Path]:
    """Run `job` under `compilewatch collect`: (the seconds its own clock printed, the bundle)."""
    script = tmp / "job.py"
    script.write_text(job)
    out = tmp / "out"
    proc = subprocess.run([sys.executable, "-m", "compilewatch", "collect", "--model", "tiny-train", "--out", str(out),
                           "--", sys.executable, str(script)], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"first_step_s"')]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads(line)["first_step_s"], bundle


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    out = tmp / "out"
    # a cold compile: with Inductor's caches warm the backward is loaded with the forward's compile
    # and no backward compile is logged
    waited, bundle = _collect(tmp, JOB, {**ENV, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor-cache")})
    store = open_store(tmp / "db" / "cw.duckdb")
    assert ingest_paths(store, [bundle]).ok
    return waited, bundle, store


def _metric(con, name: str) -> float:
    return con.execute("SELECT value FROM run_metrics WHERE metric = ? AND subject = ''", [name]).fetchone()[0]


def test_compile_time_counts_the_backward_and_fits_in_the_scripts_wait(job):
    waited, _, store = job
    with store.read() as con:
        compile_time = _metric(con, "compile_time")
        (forward, fwd_end), = con.execute("SELECT sum(entire_frame_compile_time_s), max(start_time + "
                                          "entire_frame_compile_time_s) FROM compiles").fetchall()
        bwd = con.execute("SELECT compile_id, start_time, backward_compile_time_s FROM later_compile_metrics "
                          "WHERE event = 'bwd_compilation_metrics'").fetchall()
        fwd_ids = {c for (c,) in con.execute("SELECT compile_id FROM compiles").fetchall()}
    # the backward was compiled, lazily: after the forward's compile, under the same compile id
    assert bwd and {c for c, _, _ in bwd} <= fwd_ids
    assert all(start >= fwd_end - 0.01 for _, start, _ in bwd)
    backward = sum(s for _, _, s in bwd)
    assert backward > 0.1
    # compile time is the forward and the backward (no runtime autotuning on the CPU) ...
    assert compile_time == pytest.approx(forward + backward, abs=1e-5)
    assert compile_time > forward + 0.1
    # ... all of it inside what the script waited for its first step
    assert compile_time <= waited


def test_time_to_first_step_agrees_with_the_scripts_clock(job):
    """The hooks measure from the process's start (the kernel's start time, before the interpreter
    ran) to the end of the first optimizer step; the script from its first line to just after that
    step returned. The two differ by the interpreter's start-up, whatever the machine's load made
    the compile cost."""
    waited, bundle, store = job
    timings = json.loads((bundle / "timings.json").read_text())
    assert timings["first_step_source"] == "optimizer_step"
    assert timings["process_start_source"] == "proc_stat"
    with store.read() as con:
        ttfs = _metric(con, "time_to_first_step")
        unit, direction = con.execute("SELECT unit, direction FROM run_metrics WHERE metric = 'time_to_first_step'"
                                      ).fetchone()
    assert (unit, direction) == ("s", "lower")
    assert ttfs == pytest.approx(timings["time_to_first_step_s"])
    # start-up comes before the script's clock starts; the step ends (10 ms ticks) before it stops
    assert waited - 0.05 <= ttfs <= waited + max(2.0, 0.1 * waited), (ttfs, waited)


def test_without_an_optimizer_the_first_step_is_the_first_call_of_the_model(tmp_path):
    waited, bundle = _collect(tmp_path, INFERENCE_JOB, ENV)
    timings = json.loads((bundle / "timings.json").read_text())
    assert timings["first_step_source"] == "compiled_call"
    ttfs = timings["time_to_first_step_s"]
    # the model's first call, not the helper's (called first, but once)
    assert waited - 0.05 <= ttfs <= waited + max(2.0, 0.1 * waited), (ttfs, waited)
