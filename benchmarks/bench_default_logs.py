"""What the collector's default TORCH_LOGS costs: the previous default against the new one, on the
same real job in the same run.

    .venv/bin/python benchmarks/bench_default_logs.py                       # CPU, or CUDA when there is a GPU
    python3 benchmarks/bench_default_logs.py --device cuda --repeat 3 --steps 200 --json out.json   # a GPU host

The job is sample_logs/scripts/cudagraphs/coverage_job.py (--version, default `skip`: a
reduce-overhead MLP whose forward holds a CPU op, so torch 2.11+ splits its CUDA graph, plus a
compiled helper whose CUDA graphs are skipped): everything the `cudagraphs` component logs. Each
repeat runs it twice under `compilewatch collect`, alternately with `--logs` set to the previous
default (graph_breaks,recompiles,perf_hints) and with no `--logs` (the new default), each with an
empty Inductor cache of its own, so both compile cold. Printed per run and as medians, with the
new/previous ratio and the load average:

- log bytes and lines: torch_logs.txt as the collector wrote it (the `cudagraphs` lines apart);
- wall: the collected command's wall time (manifest wall_time_s), compiles included;
- step: the hooks' steady median of the compiled forward and the iteration period (between
  optimizer steps), i.e. whether logging slows the steps the job is there for.

On the CPU CUDA graphs are not used, so the new component logs nothing there; on a GPU
(`--device cuda`, the default where torch sees one) it logs each recording, partition and skip.

    .venv/bin/python benchmarks/bench_default_logs.py --bundles sample_logs/gpu-h100-torch2.11-cudagraphs

reads bundles already collected with the `cudagraphs` component instead (no job is run): per
bundle, its torch_logs.txt's bytes and lines, and the share of them the `cudagraphs` component
wrote, i.e. what the log would have been under the previous default.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "sample_logs" / "scripts" / "cudagraphs" / "coverage_job.py"

PREVIOUS = "graph_breaks,recompiles,perf_hints"   # collectors/torch_logs.py: PREVIOUS_DEFAULT_LOGS


def _device(asked: str) -> str:
    if asked != "auto":
        return asked
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def one_run(py: str, logs: str | None, args, scratch: Path) -> dict:
    """Collect the job once (logs None: the collector's default) and read what it cost."""
    out = Path(tempfile.mkdtemp(prefix="bundles-", dir=scratch))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-", dir=scratch),
           "PYTHONUNBUFFERED": "1"}
    env.pop("TORCH_LOGS", None)
    if args.device == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [py, "-m", "compilewatch", "collect", "--model", "bench-default-logs", "--label", logs or "default",
           "--out", str(out)] + (["--logs", logs] if logs else []) + \
          ["--", py, str(JOB), "--version", args.version, "--steps", str(args.steps), "--device", args.device]
    load0 = os.getloadavg()[0]
    proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise SystemExit(f"the job failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    manifest = json.loads((bundle / "manifest.json").read_text())
    timings = json.loads((bundle / "timings.json").read_text())
    text = (bundle / "torch_logs.txt").read_bytes()
    lines = text.splitlines()
    by_name = {c["name"]: c for c in timings["callables"]}
    iteration = next((c for c in timings["callables"] if c.get("mode") == "iteration"), {})
    return {"logs": manifest.get("torch_logs_setting"), "log_bytes": len(text), "log_lines": len(lines),
            "cudagraphs_lines": sum(b"[__cudagraphs]" in ln for ln in lines),
            "wall_s": manifest["wall_time_s"],
            "forward_ms": (by_name.get("MLP.forward") or {}).get("steady_median_ms"),
            "iteration_ms": iteration.get("steady_median_ms"),
            "load": round((load0 + os.getloadavg()[0]) / 2, 2), "device": timings.get("device"),
            "gpu": (timings.get("env") or {}).get("gpu_name"), "torch": (timings.get("env") or {}).get("torch_version")}


def from_bundles(paths: list[Path]) -> None:
    """The `cudagraphs` lines' share of the text logs of bundles collected with that component."""
    import tarfile
    archives = sorted(p for path in paths for p in ([path] if path.is_file() else path.rglob("*.tar.gz")))
    total = cg_total = bundles = 0
    for a in archives:
        with tarfile.open(a) as tar:
            m = next((m for m in tar.getmembers() if m.name.endswith("/torch_logs.txt")), None)
            man = next((m for m in tar.getmembers() if m.name.endswith("/manifest.json")), None)
            if m is None or man is None:
                continue
            setting = json.loads(tar.extractfile(man).read()).get("torch_logs_setting") or ""
            if "cudagraphs" not in setting.split(","):
                continue
            lines = tar.extractfile(m).read().splitlines(keepends=True)
            bundle = sum(x.size for x in tar.getmembers() if x.isfile())
        cg = sum(len(ln) for ln in lines if b"[__cudagraphs]" in ln)
        size = sum(len(ln) for ln in lines)
        total, cg_total, bundles = total + size, cg_total + cg, bundles + bundle
        print(f"{a.name}: log {size:,} B, {len(lines):,} lines; cudagraphs {cg:,} B "
              f"({sum(b'[__cudagraphs]' in ln for ln in lines):,} lines): {100 * cg / max(size, 1):.0f}% of the log, "
              f"{100 * cg / bundle:.2f}% of the bundle's {bundle:,} B unpacked; without it {size - cg:,} B")
    if total:
        print(f"all: logs {total:,} B, of which cudagraphs {cg_total:,} B ({100 * cg_total / total:.0f}%): "
              f"x{total / max(total - cg_total, 1):.2f} the previous default's log, "
              f"{100 * cg_total / bundles:.2f}% of the bundles' {bundles:,} B")


def _median(rows, key):
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.median(vals) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--version", default="skip", choices=("one-graph", "cpu-op", "skip"))
    ap.add_argument("--steps", type=int, default=None, help="default: 200 on a GPU, 20 on the CPU")
    ap.add_argument("--repeat", type=int, default=2, help="pairs of runs, previous and new alternating")
    ap.add_argument("--python", default=sys.executable, help="the python with torch and compilewatch")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json", type=Path, help="also write every run's figures here")
    ap.add_argument("--bundles", type=Path, nargs="+", help="read these bundles (or folders of .tar.gz) "
                    "collected with the cudagraphs component instead of running the job")
    args = ap.parse_args()
    if args.bundles:
        from_bundles(args.bundles)
        return
    args.device = _device(args.device)
    args.steps = args.steps or (200 if args.device == "cuda" else 20)
    runs = {"previous": [], "default": []}
    with tempfile.TemporaryDirectory(prefix="bench-default-logs-") as tmp:
        for i in range(args.repeat):
            # alternate which goes first, so a warming machine favours neither
            order = (("previous", PREVIOUS), ("default", None)) if i % 2 == 0 else (("default", None), ("previous", PREVIOUS))
            for name, logs in order:
                r = one_run(args.python, logs, args, Path(tmp))
                runs[name].append(r)
                print(f"{name:>8} ({r['logs']}): {r['log_bytes']:,} B in {r['log_lines']:,} lines "
                      f"({r['cudagraphs_lines']:,} cudagraphs), wall {r['wall_s']:.1f} s, forward "
                      f"{r['forward_ms']} ms, iteration {r['iteration_ms']} ms, load {r['load']}", flush=True)
    first = runs["default"][0]
    print(f"\n{args.version} job, {args.steps} steps on {first['device']} ({first['gpu'] or 'CPU'}), torch {first['torch']}, "
          f"{args.repeat} run(s) each; medians:")
    summary = {}
    for key, unit in (("log_bytes", "B"), ("log_lines", ""), ("cudagraphs_lines", ""), ("wall_s", "s"),
                      ("forward_ms", "ms"), ("iteration_ms", "ms")):
        prev, new = _median(runs["previous"], key), _median(runs["default"], key)
        ratio = new / prev if prev and new is not None else None
        summary[key] = {"previous": prev, "default": new, "ratio": ratio}
        def show(v):
            return f"{v:>10,.4g}" if v is not None else f"{'-':>10}"
        print(f"  {key:<17} previous {show(prev)} {unit:<2}  default {show(new)} {unit:<2}  "
              + (f"x{ratio:.3f}" if ratio else ""))
    loads = [r["load"] for rs in runs.values() for r in rs]
    print(f"  load average {min(loads)}-{max(loads)}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs,
                                         "medians": summary}, indent=1))


if __name__ == "__main__":
    main()
