"""One model, one mode: eager then compiled on the same batches, in this process.

Run by `compilewatch bench` under `collect` (so the compile is logged and traced into the bundle);
writes one row of bench.csv into $COMPILEWATCH_BUNDLE (or --csv) and the step series into the
hooks' timings.json.

Timing: the first step of each is timed alone with the device synchronised (for the compiled model
that is the compilation latency); the next --warmup steps run untimed-for-the-figures; each of the
--steps steady steps is bracketed by a pair of CUDA events (no synchronisation until the end), or
by the host clock on CPU, where kernels are synchronous. Median and IQR are over steady steps.
"""
from __future__ import annotations

import argparse
import copy
import csv
import os
import sys
import time

CSV_COLUMNS = [
    # PyTorch benchmarks/dynamo (latency ms, compilation s, memory GB)
    "dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
    "eager_peak_mem", "dynamo_peak_mem", "calls_captured", "unique_graphs", "graph_breaks",
    "unique_graph_breaks",
    # ours
    "mode", "task", "eager_latency", "compiled_spread", "eager_spread", "recompiles", "steps",
]


def percentile(vals, q):
    s = sorted(vals)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _compile_fn():
    import torch
    hooks = sys.modules.get("compilewatch.collectors.hooks")
    # Time with our own events, not the hooks' wrapper, so nothing is timed twice.
    return getattr(hooks, "ORIGINAL_COMPILE", None) or torch.compile


def make_step(torch, wl, model, batches, task, amp, device):
    from compilewatch.collectors.models import split_call
    train = task == "train"
    model.train(train)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9) if train else None
    use_amp = amp and device == "cuda"

    def step(i):
        batch = batches[i % len(batches)]
        if wl.before_call is not None:
            wl.before_call(model, i, batch)
        args, kw = split_call(batch)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            if train:
                opt.zero_grad(set_to_none=True)
                out = wl.loss(model(*args, **kw), batch)
            else:
                with torch.no_grad():
                    out = model(*args, **kw)
        if train:
            out.backward()
            opt.step()
    return step


def run_series(torch, step, n_warmup, n_steps, cuda):
    """-> (first_ms, warmup_ms list, steady_ms list, peak bytes or None)"""
    import gc
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    step(0)
    if cuda:
        torch.cuda.synchronize()
    first_ms = (time.perf_counter() - t0) * 1e3
    times = []
    if cuda:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(n_warmup + n_steps)]
        for k, (e0, e1) in enumerate(events, start=1):
            e0.record()
            step(k)
            e1.record()
        torch.cuda.synchronize()
        times = [e0.elapsed_time(e1) for e0, e1 in events]
        peak = torch.cuda.max_memory_allocated()
    else:
        for k in range(1, n_warmup + n_steps + 1):
            t = time.perf_counter()
            step(k)
            times.append((time.perf_counter() - t) * 1e3)
        peak = None
    return first_ms, times[:n_warmup], times[n_warmup:], peak


def count_recompiles(utils) -> int:
    """Compiles of a frame after its first: distinct compile ids "<frame>/<n>" with n > 0 (several
    metrics records can share one id, e.g. forward and backward; restarts "_<attempt>" are the same compile)."""
    ids = set()
    for m in utils.get_compilation_metrics():
        cid = getattr(m, "compile_id", None) or ""
        last = cid.rsplit("/", 1)[-1].split("_")[0]
        if last.isdigit() and int(last) > 0:
            ids.add(cid.split("_")[0])
    return len(ids)


def _parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m compilewatch.collectors.bench_worker")
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="default")
    p.add_argument("--task", choices=("train", "infer"), default="train")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--amp", action="store_true")
    p.add_argument("--csv", default=None)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse_args(argv)

    import torch
    from torch._dynamo import utils as dyn_utils

    from compilewatch.collectors import hooks
    from compilewatch.collectors.models import build

    # This worker steps an eager and then a compiled model, each with its own optimizer, and times
    # its own steps: an iteration period across both would describe neither.
    if hooks._ITERATION_HANDLE is not None:
        hooks._ITERATION_HANDLE.remove()
        hooks._ITERATION_HANDLE = None

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("compilewatch bench: error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if device == "cuda":
        torch.cuda.init()
    wl = build(args.model, device, args.batch_size)
    eager, comp = _eager_then_compiled(torch, dyn_utils, wl, args, device)
    row = _csv_row(args, device, wl, eager, comp, dyn_utils)
    _record(args, eager, comp, row)
    # The hooks write timings.json at exit when injected; when run by hand, write next to the CSV.
    path = args.csv or os.path.join(os.environ.get("COMPILEWATCH_BUNDLE", "."), "bench.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerow(row)
    print(f"bench {args.model} {args.mode} {args.task} on {device}: eager {percentile(eager[2], 0.5):.3f} ms, "
          f"compiled {percentile(comp[2], 0.5):.3f} ms, speedup {row['speedup']}x, compile {row['compilation_latency']} s, "
          f"graphs {row['unique_graphs']}, graph breaks {row['graph_breaks']}, recompiles {row['recompiles']}",
          file=sys.stderr)
    return 0


def _eager_then_compiled(torch, dyn_utils, wl, args, device) -> tuple[tuple, tuple]:
    """run_series of the eager model, then of its torch.compile'd copy (same starting weights,
    same batches), with dynamo's counters cleared between them."""
    cuda = device == "cuda"
    n_total = 1 + args.warmup + args.steps
    n_batches = wl.distinct_batches or n_total
    batches = [wl.make_batch(i) for i in range(min(n_batches, n_total))]
    compiled_base = copy.deepcopy(wl.model)   # same starting weights for both

    eager = run_series(torch, make_step(torch, wl, wl.model, batches, args.task, args.amp, device),
                       args.warmup, args.steps, cuda)
    del wl.model
    if cuda:
        torch.cuda.empty_cache()

    torch._dynamo.reset()
    dyn_utils.counters.clear()
    compiled = _compile_fn()(compiled_base, mode=None if args.mode == "default" else args.mode, **wl.compile_kwargs)
    comp = run_series(torch, make_step(torch, wl, compiled, batches, args.task, args.amp, device),
                      args.warmup, args.steps, cuda)
    return eager, comp


def _csv_row(args, device: str, wl, eager: tuple, comp: tuple, dyn_utils) -> dict:
    """bench.csv's row, in PyTorch benchmarks/dynamo's columns and ours."""
    eager_first, _, eager_ms, eager_peak = eager
    comp_first, _, comp_ms, comp_peak = comp
    c = dyn_utils.counters
    eager_med, comp_med = percentile(eager_ms, 0.5), percentile(comp_ms, 0.5)
    gb = 1024 ** 3
    return {
        "dev": device, "name": args.model, "batch_size": wl.batch_size,
        "speedup": round(eager_med / comp_med, 4) if comp_med > 0 else "",
        "abs_latency": round(comp_med, 4),
        "compilation_latency": round(comp_first / 1e3, 3),
        "compression_ratio": round(eager_peak / comp_peak, 4) if eager_peak and comp_peak else "",
        "eager_peak_mem": round(eager_peak / gb, 4) if eager_peak else "",
        "dynamo_peak_mem": round(comp_peak / gb, 4) if comp_peak else "",
        "calls_captured": c["stats"]["calls_captured"],
        "unique_graphs": c["stats"]["unique_graphs"],
        "graph_breaks": sum(c["graph_break"].values()),
        "unique_graph_breaks": len(c["graph_break"]),
        "mode": args.mode, "task": args.task,
        "eager_latency": round(eager_med, 4),
        "compiled_spread": round(percentile(comp_ms, 0.75) - percentile(comp_ms, 0.25), 4),
        "eager_spread": round(percentile(eager_ms, 0.75) - percentile(eager_ms, 0.25), 4),
        "recompiles": count_recompiles(dyn_utils),
        "steps": args.steps,
    }


def _record(args, eager: tuple, comp: tuple, row: dict) -> None:
    """Both series into the hooks' timings, as the callables they time."""
    from compilewatch.collectors.hooks import RECORDER

    eager_first, eager_warm, eager_ms, _ = eager
    comp_first, comp_warm, comp_ms, comp_peak = comp
    common = {"graphs": row["unique_graphs"], "graph_breaks": row["graph_breaks"]}
    RECORDER.record_series(f"{args.model}[eager]", "eager", eager_warm + eager_ms, first_call_ms=eager_first,
                           warmup=len(eager_warm), compile_peak_mem_bytes=None)
    RECORDER.record_series(f"{args.model}[{args.mode}]", "compiled", comp_warm + comp_ms, first_call_ms=comp_first,
                           warmup=len(comp_warm), compile_peak_mem_bytes=comp_peak, recompiles=row["recompiles"], **common)


if __name__ == "__main__":
    sys.exit(main())
