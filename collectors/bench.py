"""`compilewatch bench`: eager vs torch.compile for built-in models and modes, one bundle each.

Each (model, mode, repeat) runs `python -m compilewatch.collectors.bench_worker` under `collect`, so its bundle
holds the compile's TORCH_LOGS text, TORCH_TRACE, timings.json and a one-row bench.csv; every row
is also appended to <out>/bench.csv. Separate processes keep one mode's compile caches and dynamo
state out of the next one's figures; --repeats gives run-to-run spread.
"""
from __future__ import annotations

import csv
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from compilewatch.collectors.bench_worker import CSV_COLUMNS
from compilewatch.collectors.collect import archive_bundle, collect
from compilewatch.collectors.models import get_spec
from compilewatch.collectors.torch_logs import DEFAULT_LOGS
from compilewatch.collectors.version import __version__
from compilewatch.core.errors import CollectError, ModelUnavailableError, OutputNotWritableError, TorchMissingError

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
REPO_ROOT = Path(__file__).resolve().parent.parent


def _check(models, modes, skip_missing):
    if importlib.util.find_spec("torch") is None:
        raise TorchMissingError(f"torch is not installed for {sys.executable}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise CollectError(f"unknown torch.compile mode {bad[0]!r}", f"use one of {', '.join(MODES)}")
    keep = []
    for m in models:
        try:
            get_spec(m)
            keep.append(m)
        except ModelUnavailableError as e:
            if not skip_missing:
                raise
            print(f"compilewatch bench: skipping {m}: {e.title}", file=sys.stderr)
    return keep


def run_bench(models, modes=("default",), task="train", steps=20, warmup=3, device=None,
              out_dir=".compilewatch/bench", batch_size=None, amp=False, repeats=1, timeout=None,
              archive=False, logs=DEFAULT_LOGS, skip_missing=False, tee=True,
              budget_s=None) -> list[dict]:
    """Run every model x mode x repeat; return the rows (bench.csv columns + exit_status, bundle, repeat).
    With budget_s, no new run starts once that many seconds have passed (the rest are listed as skipped)."""
    models = _check(models, modes, skip_missing)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputNotWritableError(f"cannot create {out}: {e.strerror or e}")
    summary = out / "bench.csv"
    rows = []
    t_start = time.monotonic()
    for rep in range(repeats):
        for mode in modes:
            for model in models:
                if budget_s is not None and time.monotonic() - t_start > budget_s:
                    print(f"compilewatch bench: budget of {budget_s:.0f} s spent, skipping {model} {mode} run {rep + 1}",
                          file=sys.stderr)
                    continue
                cmd = [sys.executable, "-m", "compilewatch.collectors.bench_worker", "--model", model, "--mode", mode,
                       "--task", task, "--steps", str(steps), "--warmup", str(warmup)]
                if device:
                    cmd += ["--device", device]
                if batch_size:
                    cmd += ["--batch-size", str(batch_size)]
                if amp:
                    cmd += ["--amp"]
                print(f"compilewatch bench: {model} {mode} {task} (run {rep + 1}/{repeats})", file=sys.stderr)
                res = collect(cmd, out, model=model, label=f"{mode}/{task}", logs=logs, timeout=timeout,
                              collector=f"compilewatch bench {__version__}", tee=tee,
                              # the worker imports collectors even where compilewatch isn't installed
                              pythonpath=[str(REPO_ROOT)],
                              # a speedup is eager over compiled in one process on one host: the
                              # machine's speed cancels out, and a probe per model and mode costs seconds
                              probe=False,
                              manifest_extra={"bench": {"mode": mode, "task": task, "steps": steps, "warmup": warmup,
                                                        "amp": amp, "repeat": rep}})
                row = _read_row(res.bundle / "bench.csv")
                row.update({"exit_status": res.exit_status, "end_reason": res.end_reason,
                            "bundle": str(res.bundle), "repeat": rep})
                if "speedup" in row and res.exit_status == 0:
                    _append(summary, row)
                rows.append(row)
                if archive:
                    row["bundle"] = str(archive_bundle(res.bundle))
                if res.signal_received is not None:
                    # Ctrl-C / SIGTERM was meant for the whole bench, not just this run.
                    _print_table(rows)
                    return rows
    _print_table(rows)
    return rows


def _read_row(path: Path) -> dict:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return next(csv.DictReader(f), {}) or {}
    except OSError:
        return {}


def _append(summary: Path, row: dict):
    new = not summary.exists()
    with open(summary, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow(row)


def aggregate(rows) -> list[dict]:
    """Per (model, mode, task): speedup median and min..max over repeats, compile latency median."""
    groups: dict = {}
    for r in rows:
        if r.get("speedup") in (None, ""):
            continue
        groups.setdefault((r["name"], r["mode"], r["task"]), []).append(r)
    out = []
    for (name, mode, task), rs in groups.items():
        sp = [float(r["speedup"]) for r in rs]
        cl = [float(r["compilation_latency"]) for r in rs]
        out.append({"name": name, "mode": mode, "task": task, "runs": len(rs),
                    "speedup_median": statistics.median(sp), "speedup_min": min(sp), "speedup_max": max(sp),
                    "compile_s_median": statistics.median(cl),
                    "eager_ms": statistics.median(float(r["eager_latency"]) for r in rs),
                    "compiled_ms": statistics.median(float(r["abs_latency"]) for r in rs),
                    "graph_breaks": rs[0]["graph_breaks"], "unique_graphs": rs[0]["unique_graphs"],
                    "recompiles": rs[0]["recompiles"]})
    return out


def _print_table(rows):
    agg = aggregate(rows)
    if not agg:
        print("compilewatch bench: no results", file=sys.stderr)
        return
    print(f"{'model':18} {'mode':16} {'task':5} {'runs':>4} {'eager ms':>9} {'comp ms':>9} {'speedup':>8} "
          f"{'(min..max)':>13} {'compile s':>9} {'graphs':>6} {'breaks':>6} {'recomp':>6}")
    for a in agg:
        print(f"{a['name']:18} {a['mode']:16} {a['task']:5} {a['runs']:>4} {a['eager_ms']:>9.3f} {a['compiled_ms']:>9.3f} "
              f"{a['speedup_median']:>7.3f}x {a['speedup_min']:>6.3f}..{a['speedup_max']:<6.3f} {a['compile_s_median']:>9.2f} "
              f"{a['unique_graphs']:>6} {a['graph_breaks']:>6} {a['recompiles']:>6}")
