"""What the host probe costs a collected job, and how much it moves from run to run on this machine.

    .venv/bin/python benchmarks/bench_probe.py [--repeat 6] [--device cpu|cuda] [--json]

`compilewatch collect` runs the probe (collectors/host_probe.py) twice per job, before and after,
each in a process of its own in the job's interpreter. This prints:
- per job, with the process start: two probes as the collector runs them (`run_probe`: a new
  Python, torch's import, the workload), the median, min and max over --repeat pairs;
- per job, without the process start: two probes' workload alone (`measure` in this process,
  torch already imported), which is what a probe would cost inside a process that had torch;
- the probe's own noise: its median time over the repeats (median, min, max, (max - min) / median),
  and the before/after difference of each pair, as the review's evidence reads it;
- the machine: cores and the 1-minute load average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compilewatch.collectors import host_probe  # noqa: E402


def _stats(values: list[float]) -> dict:
    mid = statistics.median(values)
    return {"median": round(mid, 3), "min": round(min(values), 3), "max": round(max(values), 3),
            "rel_range": round((max(values) - min(values)) / mid, 3) if mid else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=6, help="job-sized pairs of probes (default: %(default)s)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = ap.parse_args()

    load_before = os.getloadavg()[0]
    env = host_probe.probe_env(dict(os.environ))
    pairs, with_start, medians, pair_moves = [], [], [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        before = host_probe.run_probe(sys.executable, env, device=args.device)
        after = host_probe.run_probe(sys.executable, env, device=before.get("device"))
        with_start.append(time.perf_counter() - t0)
        for p in (before, after):
            if "error" in p:
                print(f"probe failed: {p['error']}", file=sys.stderr)
                return 1
        pairs.append((before, after))
        medians += [before["median_ms"], after["median_ms"]]
        pair_moves.append(abs(after["median_ms"] - before["median_ms"]) / before["median_ms"])

    import torch  # noqa: F401  (imported once: the in-process figure leaves the import out)
    workload = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        host_probe.measure(args.device)
        host_probe.measure(args.device)
        workload.append(time.perf_counter() - t0)
    load_after = os.getloadavg()[0]

    out = {
        "device": pairs[0][0]["device"], "device_name": pairs[0][0].get("device_name"),
        "threads": pairs[0][0]["threads"], "workload": pairs[0][0]["workload"],
        "cores": os.cpu_count(), "load_avg_before": round(load_before, 2), "load_avg_after": round(load_after, 2),
        "per_job_with_process_start_s": _stats(with_start),
        "per_job_workload_only_s": _stats(workload),
        "torch_import_s": _stats([p["import_ms"] / 1e3 for pair in pairs for p in pair]),
        "probe_median_ms": _stats(medians),
        "probe_samples_per_probe": _stats([len(p["samples_ms"]) for pair in pairs for p in pair]),
        "before_after_move": _stats(pair_moves),
        "repeat": args.repeat,
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"device {out['device']} ({out['device_name']}), {out['threads']} threads, {out['cores']} cores; "
          f"load {out['load_avg_before']} -> {out['load_avg_after']}")
    print(f"workload: {out['workload']}")
    for key, label in (("per_job_with_process_start_s", "per job, two probes with process start (s)"),
                       ("per_job_workload_only_s", "per job, two probes' workload alone (s)"),
                       ("torch_import_s", "torch import per probe (s)"),
                       ("probe_median_ms", "probe time, run to run (ms)"),
                       ("before_after_move", "before/after move within a job (relative)")):
        s = out[key]
        print(f"{label:48s} median {s['median']}  min {s['min']}  max {s['max']}  (max-min)/median {s['rel_range']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
