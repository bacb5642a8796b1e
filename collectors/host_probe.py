"""The host probe: a short, fixed, eager workload that `compilewatch collect` times in a process of
its own right before the job starts and right after it ends, so the review can tell a slower machine
from slower code. The job's own step time cannot: a settings change slows every step with the same
graphs, and so does a loaded or throttled machine; only a workload the job cannot change tells them
apart.

The workload is the same everywhere it runs on one device kind: a fixed seed, two float32 matmuls
and one memory copy of fixed sizes, matmul precision "highest" whatever the environment says. It
runs on CUDA when the probe's process sees a GPU, else on the CPU with the thread count the job's
environment gives (OMP_NUM_THREADS and the like reach it, a script's torch.set_num_threads does
not: that is the job's setting, recorded with its settings, not the host's speed). Two warm-up
rounds, then rounds until PROBE_BUDGET_S has passed (at least MIN_ROUNDS, at most MAX_ROUNDS).

This file is also the probe's program: the collector runs its source with ``python -c`` in the
job's interpreter and environment (so nothing of compilewatch needs to be installed there), and it
prints one JSON object. Only the standard library is imported at the top.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

PROBE_BUDGET_S = 0.3
MIN_ROUNDS = 5
MAX_ROUNDS = 50
WARMUP_ROUNDS = 2
MATMULS = 2
# matmul n, copied float32 elements: a round of a few milliseconds on either, so the budget holds
# tens of rounds and their spread is the probe's own noise
SIZES = {"cpu": (512, 4 * 2**20), "cuda": (4096, 64 * 2**20)}
TIMEOUT_S = 120.0
# What the collector takes out of the job's environment for the probe: its own logs and hooks.
_COLLECTOR_ENV = ("TORCH_LOGS", "TORCH_TRACE", "COMPILEWATCH_TIMINGS", "COMPILEWATCH_BUNDLE")


def _quantile(sorted_vals, q):
    k = (len(sorted_vals) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def measure(device: str | None = None, budget_s: float = PROBE_BUDGET_S) -> dict:
    """Run the workload here and return what the manifest records of one probe (no process fields)."""
    t_import = time.perf_counter()
    import torch
    import_ms = (time.perf_counter() - t_import) * 1e3
    t0 = time.perf_counter()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = "cuda" if device.startswith("cuda") else "cpu"
    n, elements = SIZES[kind]
    torch.set_float32_matmul_precision("highest")
    # drawn where they are used: no host-side draw of 256 MiB, and no copy, before the workload on CUDA
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device)
    b = torch.randn(n, n, generator=gen, device=device)
    c = torch.empty(n, n, device=device)
    src = torch.randn(elements, generator=gen, device=device)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)

    def round_ms() -> float:
        sync()
        start = time.perf_counter()
        for _ in range(MATMULS):
            torch.mm(a, b, out=c)
        dst.copy_(src)
        sync()
        return (time.perf_counter() - start) * 1e3

    for _ in range(WARMUP_ROUNDS):
        round_ms()
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < MAX_ROUNDS and (len(samples) < MIN_ROUNDS or time.perf_counter() - started < budget_s):
        samples.append(round_ms())
    ordered = sorted(samples)
    # the CPU's name is the collector's to add: it reads it where the job's interpreter may not
    name = torch.cuda.get_device_name(torch.device(device)) if kind == "cuda" else None
    return {
        "device": device if kind == "cpu" else f"cuda:{torch.device(device).index or 0}",
        "device_name": name,
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "workload": f"{MATMULS} x matmul {n}x{n} float32 + copy of {elements * 4 // 2**20} MiB",
        "median_ms": round(_quantile(ordered, 0.5), 4),
        "iqr_ms": round(_quantile(ordered, 0.75) - _quantile(ordered, 0.25), 4),
        "min_ms": round(ordered[0], 4),
        "samples_ms": [round(s, 4) for s in samples],
        "run_ms": round((time.perf_counter() - t0) * 1e3, 1),
        "import_ms": round(import_ms, 1),
    }


# -- the collector's side ----------------------------------------------------------------------
def probe_env(job_env: dict, inject_dir: str | None = None) -> dict:
    """The job's environment without what the collector added for the job itself (its logs, its
    timing hooks), so the probe runs as the job would have, minus compilewatch."""
    env = {k: v for k, v in job_env.items() if k not in _COLLECTOR_ENV}
    if inject_dir and env.get("PYTHONPATH"):
        paths = [p for p in env["PYTHONPATH"].split(os.pathsep) if p and os.path.abspath(p) != os.path.abspath(inject_dir)]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        else:
            env.pop("PYTHONPATH")
    return env


def run_probe(python: str, env: dict, cwd: str | None = None, device: str | None = None,
              timeout: float = TIMEOUT_S) -> dict:
    """Time the workload in a new process of `python` and return the probe's record: measure()'s
    fields plus "process_s" (the process's wall time, start and torch's import included),
    "load_avg" (the 1-minute load average as it started) and "at" (UTC). A probe that could not run
    is {"error": why, ...}: a probe never stops a job from being collected."""
    load = _load_avg()
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    code = open(os.path.abspath(__file__), encoding="utf-8").read()
    args = [python, "-c", code] + ([device] if device else [])
    t0 = time.monotonic()
    try:
        proc = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"the probe ran past {timeout:.0f} s", "at": at, "load_avg": load}
    except OSError as e:
        return {"error": f"the probe could not start {python}: {e.strerror or e}", "at": at, "load_avg": load}
    process_s = round(time.monotonic() - t0, 3)
    last = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
    try:
        record = json.loads(last[0]) if last else None
    except ValueError:
        record = None
    if not isinstance(record, dict):
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return {"error": f"the probe failed: {tail[0][:300]}", "at": at, "load_avg": load, "process_s": process_s}
    record.update(process_s=process_s, load_avg=load, at=at)
    if record.get("device") == "cpu" and not record.get("device_name"):
        from compilewatch.collectors.hooks import cpu_model
        record["device_name"] = cpu_model()
    return record


def _load_avg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1] if len(sys.argv) > 1 else None)))
