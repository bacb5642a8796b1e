"""Speedup of torch.compile over eager for the built-in models, with run-to-run spread.

    python benchmarks/bench_speedups.py --models resnet18,resnet50 --modes default,reduce-overhead \
        --train --amp --steps 30 --repeats 3 --out /tmp/speedups

Runs `compilewatch bench` --repeats times (each model x mode x repeat its own process and bundle;
the first repeat compiles cold, later ones may hit inductor's on-disk FX graph cache, so their
compilation latency is the warm-cache figure) and prints, per model and mode, the median speedup
with its min..max over runs, the steady-state step times, and the cold and warm compile latency.
A --summary JSON holds the same table for the sample_logs README.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="mlp")
    p.add_argument("--modes", default="default")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--train", action="store_true")
    g.add_argument("--infer", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default=None)
    p.add_argument("--amp", action="store_true")
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--out", default=".bench/speedups")
    p.add_argument("--summary", default=None, help="write the table as JSON here")
    p.add_argument("--budget", type=float, default=None, help="start no new run after this many seconds")
    p.add_argument("--quiet", action="store_true", help="don't echo the children's output")
    args = p.parse_args(argv)

    from compilewatch.collectors.bench import run_bench

    rows = run_bench(models=args.models.split(","), modes=args.modes.split(","),
                     task="infer" if args.infer else "train", steps=args.steps, warmup=args.warmup,
                     device=args.device, out_dir=args.out, amp=args.amp, repeats=args.repeats,
                     timeout=args.timeout, skip_missing=True, tee=not args.quiet,
                     budget_s=args.budget)
    table = summarize(rows)
    print(f"\n{'model':16} {'mode':16} {'task':5} {'n':>2} {'speedup':>8} {'min..max':>13} {'eager ms':>9} "
          f"{'comp ms':>9} {'cold s':>7} {'warm s':>7} {'mem ratio':>9}")
    for t in table:
        print(f"{t['model']:16} {t['mode']:16} {t['task']:5} {t['runs']:>2} {t['speedup']:>7.3f}x "
              f"{t['speedup_min']:>6.3f}..{t['speedup_max']:<6.3f} {t['eager_ms']:>9.3f} {t['compiled_ms']:>9.3f} "
              f"{t['compile_cold_s']:>7.1f} {_f(t['compile_warm_s']):>7} {_f(t['compression_ratio']):>9}")
    failed = [r for r in rows if r.get("exit_status") != 0]
    for r in failed:
        print(f"FAILED {r.get('bundle')}: {r.get('end_reason')} (exit {r.get('exit_status')})")
    if args.summary:
        Path(args.summary).write_text(json.dumps({"rows": rows, "table": table}, indent=1, default=str))
    return 0


def _f(x):
    return "-" if x is None else f"{x:.2f}"


def summarize(rows):
    groups = {}
    for r in rows:
        if r.get("exit_status") == 0 and r.get("speedup") not in (None, ""):
            groups.setdefault((r["name"], r["mode"], r["task"]), []).append(r)
    out = []
    for (name, mode, task), rs in groups.items():
        rs.sort(key=lambda r: int(r["repeat"]))
        sp = [float(r["speedup"]) for r in rs]
        cr = [float(r["compression_ratio"]) for r in rs if r.get("compression_ratio") not in (None, "")]
        warm = [float(r["compilation_latency"]) for r in rs[1:]]
        out.append({
            "model": name, "mode": mode, "task": task, "runs": len(rs), "device": rs[0]["dev"],
            "batch_size": rs[0]["batch_size"],
            "speedup": statistics.median(sp), "speedup_min": min(sp), "speedup_max": max(sp),
            "speedup_stdev": statistics.stdev(sp) if len(sp) > 1 else 0.0,
            "eager_ms": statistics.median(float(r["eager_latency"]) for r in rs),
            "compiled_ms": statistics.median(float(r["abs_latency"]) for r in rs),
            "compiled_iqr_ms": statistics.median(float(r["compiled_spread"]) for r in rs),
            "compile_cold_s": float(rs[0]["compilation_latency"]),
            "compile_warm_s": statistics.median(warm) if warm else None,
            "compression_ratio": statistics.median(cr) if cr else None,
            "unique_graphs": rs[0]["unique_graphs"], "graph_breaks": rs[0]["graph_breaks"],
            "recompiles": rs[0]["recompiles"],
        })
    return out


if __name__ == "__main__":
    sys.exit(main())
