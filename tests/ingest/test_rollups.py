"""The rollups kept at ingest (per run: store/rollups.py; per day and cell: store/day_rollups.py; per
month cell: store/month_rollups.py; the Overview's KPIs per day and month cell among them, and the
runtime linkage's sums and DDSketch bins at both levels; the bench rows per week cell: store/bench_weeks.py;
Compare's sides per day and week cell: store/compare_cells.py)
equal the aggregate over the raw event rows, on real logs, after every way a store is written: a
clean ingest, a duplicate ingest, a worker killed with SIGKILL mid-ingest and its rerun, `reingest
--all`, the migrations' backfill of an existing store, and `store copy` (to a DuckLake store on a real PostgreSQL too).

The expected figures are computed here in pandas from the raw rows, not by the rollups' SQL."""
from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import compare_cells, month_storms, open_store, rollups, run_filter, sketch

REPO = Path(__file__).resolve().parents[2]
TRACES = sorted((REPO / "tests" / "fixtures" / "trace").glob("*.log.gz"))
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
INPUTS = [*TRACES, *TEXTS, *BUNDLES]
MORE = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[3]


def _raw(con, table: str) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {table}").df()


def _key(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Sorted by every column, nulls as a sentinel, so two frames of the same rows compare equal."""
    out = frame[cols].astype(object).where(frame[cols].notna(), "<null>").astype(str)
    return out.sort_values(cols).reset_index(drop=True)


def _with_break_key(gb: pd.DataFrame) -> pd.DataFrame:
    """The raw breaks with their hotspot key ``k``: break_key, else type | reason | file:line."""
    key = gb["break_key"].copy()
    fallback = gb.apply(lambda r: " | ".join(str(x) for x in (r.gb_type, r.reason_norm,
                                                                (f"{r.user_file}:{int(r.user_line)}"
                                                                 if pd.notna(r.user_file) and pd.notna(r.user_line) else None))
                                             if x is not None and not (isinstance(x, float) and np.isnan(x))), axis=1)
    return gb.assign(k=key.where(key.notna(), fallback))


_SECONDS = ("total_s", "tracing_s", "aot_s", "inductor_s", "autotune_s", "forward_s", "backward_s", "runtime_autotune_s")
_FRAME_COMPILE = ["file_id", "rank", "compiled_autograd_id", "frame_id", "frame_compile_id"]


def _with_later(con, c: pd.DataFrame) -> pd.DataFrame:
    """The compiles with each frame compile's backward and runtime autotuning seconds (from
    later_compile_metrics) on its last compiles row, and total_s = forward + backward + runtime
    autotuning: what the job waited for (store/compile_time.py)."""
    later = _raw(con, "later_compile_metrics")
    def key(frame):
        ids = [frame[col].map(lambda v: "<null>" if pd.isna(v) else str(int(v))) for col in _FRAME_COMPILE]
        return ids[0].str.cat(ids[1:], sep="|") if len(frame) else pd.Series([], dtype=str)
    later["key"] = key(later)
    old = later[later["event"] == "aot_autograd_backward_compilation_metrics"].groupby("key")["backward_compile_time_s"].sum()
    bwd = later[later["event"] == "bwd_compilation_metrics"].groupby("key")["backward_compile_time_s"].sum()
    per = pd.DataFrame({"backward_s": old.combine_first(bwd),
                        "runtime_autotune_s": later.groupby("key")["runtime_autotune_time_s"].sum(min_count=1)})
    c = c.assign(key=key(c)).sort_values("line_no")
    last = ~c.duplicated("key", keep="last") & c["frame_id"].notna()
    assert set(per.index) <= set(c.loc[last, "key"]), "a later record without its compile"
    c = c.join(per, on="key")
    for col in ("backward_s", "runtime_autotune_s"):
        c[col] = c[col].where(last, None).astype(float)
    logged = c[["entire_frame_compile_time_s", "backward_s", "runtime_autotune_s"]]
    c["total_s"] = logged.fillna(0).sum(axis=1).where(logged.notna().any(axis=1))
    c[["backward_s", "runtime_autotune_s"]] = c[["backward_s", "runtime_autotune_s"]].fillna(0)
    return c.drop(columns="key")


def _expected(con) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """Per rollup table: the aggregate of the raw rows (pandas), and the columns compared."""
    gb = _with_break_key(_raw(con, "graph_breaks"))
    out = {"rollup_graph_breaks": (gb.groupby(["run_id", "k"], dropna=False).size().reset_index(name="n")
                                   .rename(columns={"k": "break_key"}), ["run_id", "break_key", "n"])}

    rc = _raw(con, "recompiles")
    rc["function"] = rc["function"].fillna("?")
    g = rc.groupby(["run_id", "function"])
    per = g.agg(n=("line_no", "size"), first_ts=("ts", "min"), last_ts=("ts", "max")).reset_index()
    per["first_reason"] = g.apply(lambda x: x.sort_values("line_no")["reason"].iloc[0], include_groups=False).values
    timed = rc[rc["ts"].notna()].assign(minute=lambda x: np.floor(x["ts"] / 60))
    burst = (timed.groupby(["run_id", "function", "minute"]).size().groupby(["run_id", "function"]).max()
             .rename("burst").reset_index())
    per = per.merge(burst, on=["run_id", "function"], how="left").fillna({"burst": 0})
    per["burst"] = per["burst"].astype(int)
    out["rollup_recompiles"] = (per, ["run_id", "function", "n", "first_ts", "last_ts", "burst"])

    gf = _raw(con, "guard_failures")
    cols = ["run_id", "function", "category", "guard_key"]
    out["rollup_guard_failures"] = (gf.groupby(cols, dropna=False).agg(n=("line_no", "size"),
                                                                       first_line_no=("line_no", "min")).reset_index(),
                                    [*cols, "n", "first_line_no"])
    lh = _raw(con, "limit_hits")
    cols = ["run_id", "function", "limit_name"]
    out["rollup_limit_hits"] = (lh.groupby(cols, dropna=False).size().reset_index(name="n"), [*cols, "n"])

    c = _raw(con, "compiles")
    c["co_file"] = c["co_filename"].str.extract(r"([^/\\]*)$", expand=False)
    z = {k: c[k].fillna(0) for k in ("entire_frame_compile_time_s", "backend_compile_time_s",
                                     "inductor_compile_time_s", "autotune_time_s")}
    c["tracing_s"] = (z["entire_frame_compile_time_s"] - z["backend_compile_time_s"]).clip(lower=0)
    c["aot_s"] = (z["backend_compile_time_s"] - z["inductor_compile_time_s"]).clip(lower=0)
    c["inductor_s"] = (z["inductor_compile_time_s"] - z["autotune_time_s"]).clip(lower=0)
    c["autotune_s"] = np.minimum(z["autotune_time_s"], c["inductor_compile_time_s"].fillna(z["autotune_time_s"]))
    c["recompile"] = c["is_recompile"].fillna(False).astype(bool)
    c = _with_later(con, c)
    ce = _raw(con, "cache_events")
    misses = ce[ce["outcome"] == "miss"].groupby(["file_id", "compile_id"]).size().rename("m").reset_index()
    c = c.merge(misses, on=["file_id", "compile_id"], how="left")
    c["m"] = c["m"].fillna(0)
    cols = ["run_id", "co_name", "co_file", "co_firstlineno"]
    ct = c.groupby(cols, dropna=False).agg(
        compiles=("line_no", "size"), recompiles=("recompile", "sum"),
        total_s=("total_s", lambda s: s.sum(min_count=1)),
        tracing_s=("tracing_s", "sum"), aot_s=("aot_s", "sum"), inductor_s=("inductor_s", "sum"),
        autotune_s=("autotune_s", "sum"), cache_misses=("m", "sum"),
        forward_s=("entire_frame_compile_time_s", lambda s: s.sum(min_count=1)), backward_s=("backward_s", "sum"),
        runtime_autotune_s=("runtime_autotune_s", "sum")).reset_index()
    for col in _SECONDS:
        ct[col] = ct[col].round(6)
    ct["cache_misses"] = ct["cache_misses"].astype(int)
    out["rollup_compile_time"] = (ct, [*cols, "compiles", "recompiles", *_SECONDS, "cache_misses"])
    st = _raw(con, "step_timings")
    cols = ["run_id", "callable", "mode"]
    steps = st.groupby(cols, dropna=False).agg(
        calls=("phase", "size"), compile_steps=("phase", lambda p: int((p == "compile").sum())),
        steady_calls=("phase", lambda p: int((p == "steady").sum()))).reset_index()
    steady = st[st["phase"] == "steady"].groupby(cols, dropna=False)["duration_ms"].median().round(6).rename("steady_ms")
    steps = steps.merge(steady.reset_index(), on=cols, how="left")
    out["rollup_steps"] = (steps, [*cols, "calls", "compile_steps", "steady_calls", "steady_ms"])
    out["rollup_frame_fingerprints"] = _expected_fingerprints(con, c)
    counts = [frame.groupby("run_id").size().rename(name) for frame, name in
              ((gb, "graph_breaks"), (rc, "recompiles"), (lh, "limit_hits"), (gf, "guard_failures"))]
    totals = pd.concat([*counts, c.groupby("run_id")["total_s"].sum(min_count=1).rename("compile_s")], axis=1)
    totals = totals.fillna({k: 0 for k in ("graph_breaks", "recompiles", "limit_hits", "guard_failures")})
    totals["compile_s"] = totals["compile_s"].astype(float).round(6)
    totals = totals.astype({k: int for k in ("graph_breaks", "recompiles", "limit_hits", "guard_failures")})
    out["rollup_run_totals"] = (totals.rename_axis("run_id").reset_index(),
                                ["run_id", "graph_breaks", "recompiles", "limit_hits", "guard_failures", "compile_s"])
    out.update(_expected_day(con, gb, gf, rc, c))
    out["rollup_week_bench"] = _expected_bench_weeks(con)
    out.update(_expected_compare_cells(con, out))
    return out


def _expected_compare_cells(con, out: dict) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """Compare's day and week cells (store/compare_cells.py) from the per-run figures expected
    above: each run's cells (its time's day, or the Monday of its week, its model, hardware and
    torch version); its totals, breaks, recompiles, limit hits and categorised guard failures summed
    per cell and key (a limit hit or failure without a function under '?'); the timing hooks' step
    and iteration times counted per cell, metric and callable, with their range and their values
    and spreads, sorted."""
    runs = _raw(con, "runs")
    t = pd.to_datetime(runs["started_at"].fillna(runs["ingested_at"]))
    runs["day"] = t.dt.strftime("%Y-%m-%d")
    runs["week"] = (t.dt.normalize() - pd.to_timedelta(t.dt.day_of_week, unit="D")).dt.strftime("%Y-%m-%d")
    runs["hardware"] = runs["hardware"].fillna("unknown")
    figures = ("graph_breaks", "recompiles", "limit_hits", "compile_s")
    gf = out["rollup_guard_failures"][0]
    kinds = [out["rollup_recompiles"][0].assign(kind="recompiles", category=None),
             out["rollup_limit_hits"][0].assign(kind="limit_hits", category=None),
             gf[gf["category"].notna()].assign(kind="guard_failures")]
    functions = pd.concat([k.assign(function=k["function"].fillna("?"))[["run_id", "kind", "function", "category", "n"]]
                           for k in kinds])
    m = _raw(con, "run_metrics")
    m = m[m["metric"].isin(["iteration_time", "step_time"]) & m["value"].notna()]

    def sorted_values(s: pd.Series) -> str | None:
        return "|".join(repr(float(v)) for v in sorted(s.dropna())) or None
    expected = {}
    for level in ("day", "week"):
        cell = [level, "model", "hardware", "torch_version"]
        r = runs[["run_id", *cell]]

        def per_cell(frame: pd.DataFrame, keys: list[str], **aggs) -> pd.DataFrame:
            return frame.merge(r, on="run_id").groupby([*cell, *keys], dropna=False).agg(**aggs).reset_index()
        totals = r.merge(out["rollup_run_totals"][0], on="run_id", how="left").groupby(cell, dropna=False).agg(
            runs=("run_id", "size"), **{k: (k, lambda s: s.sum(min_count=1)) for k in figures}).reset_index()
        totals["compile_s"] = totals["compile_s"].astype(float).round(6)
        totals = totals.astype({k: "Int64" for k in figures[:3]})   # null in a cell whose runs have no totals row
        breaks = per_cell(out["rollup_graph_breaks"][0], ["break_key"], n=("n", "sum"), runs=("run_id", "size"))
        steps = per_cell(m, ["metric", "subject"], runs=("run_id", "nunique"), low=("value", "min"),
                         high=("value", "max"), vals=("value", sorted_values), spreads=("spread", sorted_values))
        expected.update({
            f"rollup_compare_{level}_totals": (totals, [*cell, "runs", *figures]),
            f"rollup_compare_{level}_breaks": (breaks, [*cell, "break_key", "n", "runs"]),
            f"rollup_compare_{level}_functions": (per_cell(functions, ["kind", "function", "category"], n=("n", "sum")),
                                                  [*cell, "kind", "function", "category", "n"]),
            f"rollup_compare_{level}_steps": (steps, [*cell, "metric", "subject", "runs", "low", "high", "vals",
                                                      "spreads"])})
    return expected


def _expected_bench_weeks(con) -> tuple[pd.DataFrame, list[str]]:
    """The bench rows per week cell (store/bench_weeks.py): the Monday of the run's time, the row's
    own model else the run's, the run's hardware and torch version; logs and counts of the positive
    speedups and memory ratios, the compile latencies' sum and count, distinct runs, first and last
    run, and the labels seen, sorted, joined with '|'."""
    runs = _raw(con, "runs")
    runs["t"] = pd.to_datetime(runs["started_at"].fillna(runs["ingested_at"]))
    runs["week"] = (runs["t"].dt.normalize() - pd.to_timedelta(runs["t"].dt.day_of_week, unit="D")).dt.strftime("%Y-%m-%d")
    runs["hardware"] = runs["hardware"].fillna("unknown")
    b = _raw(con, "bench_results").merge(runs[["run_id", "model", "week", "hardware", "torch_version", "label", "t"]],
                                         on="run_id", suffixes=("", "_run"))
    b["model"] = b["model"].fillna(b["model_run"])

    def logs(s):
        return round(float(np.log(s[s > 0]).sum()), 6) if (s > 0).any() else None
    cell = ["week", "model", "hardware", "torch_version"]
    w = b.groupby(cell, dropna=False).agg(
        runs=("run_id", "nunique"), speedup_ln=("speedup", logs), speedups=("speedup", lambda s: int((s > 0).sum())),
        compile_s=("compilation_latency_s", lambda s: round(s.sum(min_count=1), 6)),
        compiles=("compilation_latency_s", "count"), memory_ln=("compression_ratio", logs),
        memories=("compression_ratio", lambda s: int((s > 0).sum())), first_run=("t", "min"), last_run=("t", "max"),
        labels=("label", lambda s: "|".join(sorted(set(s.dropna()))))).reset_index()
    for col in ("first_run", "last_run"):
        w[col] = w[col].dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    return w, [*cell, "runs", "speedup_ln", "speedups", "compile_s", "compiles", "memory_ln", "memories",
               "first_run", "last_run", "labels"]


def _md5_16(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()[:16]


def _expected_fingerprints(con, c: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Each frame's compiles in compile order, each part of a compile its artifacts' fingerprints
    sorted and joined; a frame's part the md5 of its compiles' ('-' for one that logged none), none
    when no compile logged it; fp the md5 of the five."""
    parts = {"dynamo": ("dynamo_output_graph",), "aot_fwd": ("aot_forward_graph", "aot_inference_graph"),
             "aot_bwd": ("aot_backward_graph",), "code": ("inductor_output_code",),
             "guards": ("dynamo_cpp_guards_str",), "py_guards": ("dynamo_guards",)}
    arts = _raw(con, "artifacts")
    arts = arts[arts["fp"].notna()]
    per_compile: dict[tuple, dict[str, str]] = {}
    for r in arts.itertuples():
        rank = None if pd.isna(r.rank) else int(r.rank)
        for part, kinds in parts.items():
            if r.kind in kinds:
                per_compile.setdefault((r.run_id, rank, r.compile_id), {}).setdefault(part, []).append(r.fp)
    rows = []
    frames: dict[tuple, list] = {}
    for cid, g in c[c["compile_id"].notna()].groupby(["run_id", "rank", "compile_id"], dropna=False):
        first = g.iloc[0]
        rank = None if pd.isna(cid[1]) else int(cid[1])
        order = tuple((1, 0) if pd.isna(v) else (0, v) for v in
                      (g["frame_id"].min(), g["frame_compile_id"].min(), g["attempt"].min(), g["line_no"].min()))
        got = {k: " ".join(sorted(v)) for k, v in per_compile.get((cid[0], rank, cid[2]), {}).items()}
        got["guards"] = got.get("guards") or got.get("py_guards")
        key = (cid[0], rank, first["co_name"], first["co_file"], first["co_firstlineno"])
        frames.setdefault(key, []).append((order, got))
    for key, compiles in frames.items():
        compiles.sort(key=lambda x: x[0])
        row = dict(zip(["run_id", "rank", "co_name", "co_file", "co_firstlineno"], key), compiles=len(compiles))
        for part in ("dynamo", "aot_fwd", "aot_bwd", "code", "guards"):
            values = [got.get(part) for _, got in compiles]
            row[f"{part}_fp"] = _md5_16(",".join(v or "-" for v in values)) if any(values) else None
        row["fp"] = _md5_16("|".join(row[f"{p}_fp"] or "-" for p in ("dynamo", "aot_fwd", "aot_bwd", "code", "guards")))
        rows.append(row)
    cols = ["run_id", "rank", "co_name", "co_file", "co_firstlineno", "compiles", "dynamo_fp", "aot_fwd_fp",
            "aot_bwd_fp", "code_fp", "guards_fp", "fp"]
    return pd.DataFrame(rows, columns=cols), cols


def _expected_day(con, gb: pd.DataFrame, gf: pd.DataFrame, rc: pd.DataFrame,
                  c: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """The day rollups (store/day_rollups.py) and month rollups (store/month_rollups.py) from the raw
    rows: each run's cell from its runs row, breaks, failures, recompiles and compile time summed per
    cell and key, runs counted distinct."""
    runs = _raw(con, "runs")
    runs["t"] = pd.to_datetime(runs["started_at"].fillna(runs["ingested_at"]))
    runs["day"] = runs["t"].dt.strftime("%Y-%m-%d")
    runs["month"] = runs["t"].dt.strftime("%Y-%m-01")
    runs["hardware"] = runs["hardware"].fillna("unknown")
    day_cell = ["day", "model", "hardware", "torch_version", "label"]
    out = {"rollup_day_runs": (runs, ["run_id", *day_cell])}
    bench = _raw(con, "bench_results")
    out.update(_per_cell("day", day_cell, runs, gb, gf, rc, c, bench))
    out.update(_per_cell("month", ["month", "model", "hardware", "torch_version"], runs, gb, gf, rc, c, bench))
    linked = _linked(con)
    out.update(_linkage_per_cell("day", day_cell, runs, linked))
    out.update(_linkage_per_cell("month", ["month", "model", "hardware", "torch_version"], runs, linked))
    return out


_LINKED_MEDIANS = ["steady_ms", "compile_ms", "compile_cost_ms", "eager_ms"]


def _linked(con) -> pd.DataFrame:
    """Per run, callable and mode ('compiled', 'marked') of the timing hooks' raw steps: calls,
    compiling calls and their time, the steady call (median of the run's steady calls of the callable,
    its modes and ranks pooled), the compile cost (the compiling calls' time beyond steady speed, 0 at
    least) and the run's eager call (the bench's median eager latency, else the steady median of its
    one eager callable)."""
    st = _raw(con, "step_timings")
    timed = st[st["mode"].isin(["compiled", "marked"])]
    keys = ["run_id", "callable", "mode"]
    per = timed.groupby(keys, dropna=False).agg(
        calls=("phase", "size"), compile_steps=("phase", lambda p: int((p == "compile").sum()))).reset_index()
    compiling = timed[timed["phase"] == "compile"].groupby(keys, dropna=False)["duration_ms"].sum().rename("compile_ms")
    steady = (timed[timed["phase"] == "steady"].groupby(["run_id", "callable"], dropna=False)["duration_ms"]
              .median().rename("steady_ms"))
    per = per.merge(compiling.reset_index(), on=keys, how="left").merge(steady.reset_index(), on=["run_id", "callable"],
                                                                         how="left")
    per["compile_cost_ms"] = (per["compile_ms"] - per["compile_steps"] * per["steady_ms"].fillna(0)).clip(lower=0).fillna(0)
    bench = _raw(con, "bench_results")
    bench = bench[bench["eager_latency_ms"] > 0].groupby("run_id")["eager_latency_ms"].median()
    eager = st[(st["mode"] == "eager") & (st["phase"] == "steady")].groupby(["run_id", "callable"])["duration_ms"].median()
    one = eager.groupby("run_id").size() == 1
    eager = eager.reset_index().set_index("run_id")["duration_ms"][one[one].index]
    per["eager_ms"] = per["run_id"].map(bench.combine_first(eager))
    return per


def _sketch_bin(value: float) -> tuple[int, int]:
    """(side, bin) of a value in store/sketch.py's DDSketch: ceil(log_gamma |value|), 0 for zero."""
    return int(np.sign(value)), 0 if value == 0 else math.ceil(math.log(abs(value)) / math.log(sketch.GAMMA))


def _linkage_per_cell(level: str, cell: list[str], runs: pd.DataFrame,
                      linked: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """rollup_<level>_linkage and its bins: the runs' linkage summed per ``cell``, callable and mode,
    and each run's figures counted per metric and bin."""
    keys = [*cell, "callable", "mode"]
    per = linked.merge(runs[["run_id", *cell]], on="run_id")
    sums = per.groupby(keys, dropna=False).agg(runs=("run_id", "size"), calls=("calls", "sum"),
                                                compile_steps=("compile_steps", "sum")).reset_index()
    values = per.melt(id_vars=keys, value_vars=_LINKED_MEDIANS, var_name="metric").dropna(subset=["value"])
    values[["sign", "bin"]] = pd.DataFrame([_sketch_bin(v) for v in values["value"]], index=values.index,
                                           columns=["sign", "bin"], dtype="int64")
    bins = values.groupby([*keys, "metric", "sign", "bin"], dropna=False).size().rename("n").reset_index()
    return {f"rollup_{level}_linkage": (sums, [*keys, "runs", "calls", "compile_steps"]),
            f"rollup_{level}_linkage_bins": (bins, [*keys, "metric", "sign", "bin", "n"])}


def _per_cell(level: str, cell: list[str], runs: pd.DataFrame, gb: pd.DataFrame, gf: pd.DataFrame,
              rc: pd.DataFrame, c: pd.DataFrame, bench: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """rollup_<level>_*: the raw rows summed per ``cell`` (columns of ``runs``) and key."""
    out = _overview_per_cell(level, cell, runs, gb, rc, c, bench)
    g = gf.merge(runs[["run_id", *cell]], on="run_id")
    g["guard"] = g["guard_key"].where(g["guard_key"].notna(), g["raw"].str[:120])
    g["category_or_other"] = g["category"].fillna("other")

    def per(frame, keys):
        return (frame.groupby(keys, dropna=False).agg(n=("run_id", "size"), runs=("run_id", "nunique"))
                .reset_index())
    parts = [per(g, [*cell, "category", "guard", "guard_key", "function"]).assign(grain="key"),
             per(g, [*cell, "category_or_other"]).rename(columns={"category_or_other": "category"}).assign(grain="category"),
             per(g, [*cell, "guard"]).assign(grain="guard")]
    out[f"rollup_{level}_guard_failures"] = (pd.concat(parts, ignore_index=True),
                                             [*cell, "grain", "category", "guard", "guard_key", "function", "n", "runs"])
    r = rc.merge(runs[["run_id", *cell]], on="run_id")
    out[f"rollup_{level}_recompiles"] = (per(r, [*cell, "function"]), [*cell, "function", "n", "runs"])
    frame = [*cell, "co_name", "co_file", "co_firstlineno"]
    ct = c.merge(runs[["run_id", *cell]], on="run_id").groupby(frame, dropna=False).agg(
        runs=("run_id", "nunique"), compiles=("line_no", "size"), recompiles=("recompile", "sum"),
        total_s=("total_s", lambda s: s.sum(min_count=1)),
        tracing_s=("tracing_s", "sum"), autotune_s=("autotune_s", "sum"), cache_misses=("m", "sum"),
        forward_s=("entire_frame_compile_time_s", lambda s: s.sum(min_count=1)), backward_s=("backward_s", "sum"),
        runtime_autotune_s=("runtime_autotune_s", "sum")).reset_index()
    for col in ("total_s", "tracing_s", "autotune_s", "forward_s", "backward_s", "runtime_autotune_s"):
        ct[col] = ct[col].round(6)
    ct["cache_misses"] = ct["cache_misses"].astype(int)
    out[f"rollup_{level}_compile_time"] = (ct, [*frame, "runs", "compiles", "recompiles", "total_s", "tracing_s",
                                                "autotune_s", "forward_s", "backward_s", "runtime_autotune_s",
                                                "cache_misses"])
    b = gb.merge(runs[["run_id", "t", *cell]], on="run_id").groupby([*cell, "k"], dropna=False).agg(
        n=("run_id", "size"), runs=("run_id", "nunique"), first_seen=("t", "min"), last_seen=("t", "max"))
    b = b.reset_index().rename(columns={"k": "break_key"})
    for col in ("first_seen", "last_seen"):
        b[col] = b[col].dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    out[f"rollup_{level}_graph_breaks"] = (b, [*cell, "break_key", "n", "runs", "first_seen", "last_seen"])
    return out


def _overview_per_cell(level: str, cell: list[str], runs: pd.DataFrame, gb: pd.DataFrame, rc: pd.DataFrame,
                       c: pd.DataFrame, bench: pd.DataFrame) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """The Overview's KPIs per cell: every run of the cell counted, its raw breaks and recompiles
    counted, its compiles' seconds summed; and per cell and bench model (the row's own, else the
    run's) the runs whose geomean of positive speedups exists, and the sum of its logarithms."""
    per_run = pd.concat([gb.groupby("run_id").size().rename("graph_breaks"),
                         rc.groupby("run_id").size().rename("recompiles"),
                         c.groupby("run_id")["total_s"].sum(min_count=1).rename("compile_s")], axis=1)
    r = runs[["run_id", *cell]].merge(per_run.rename_axis("run_id").reset_index(), on="run_id", how="left")
    totals = r.groupby(cell, dropna=False).agg(
        runs=("run_id", "size"), graph_breaks=("graph_breaks", "sum"), recompiles=("recompiles", "sum"),
        compile_s=("compile_s", lambda s: s.sum(min_count=1))).reset_index()
    totals = totals.astype({"graph_breaks": int, "recompiles": int})
    totals["compile_s"] = totals["compile_s"].astype(float).round(6)
    b = bench.merge(runs[["run_id", *cell]], on="run_id", suffixes=("_bench", ""))
    b["bench_model"] = b["model_bench"].where(b["model_bench"].notna(), b["model"])
    b = b.assign(ln=np.log(b["speedup"].where(b["speedup"] > 0)))
    per_model = b.groupby(["run_id", *cell, "bench_model"], dropna=False)["ln"].mean().dropna().reset_index()
    speedups = per_model.groupby([*cell, "bench_model"], dropna=False).agg(
        ln_sum=("ln", "sum"), runs=("run_id", "size")).reset_index()
    speedups["ln_sum"] = speedups["ln_sum"].round(9)
    return {f"rollup_{level}_run_totals": (totals, [*cell, "runs", "graph_breaks", "recompiles", "compile_s"]),
            f"rollup_{level}_speedups": (speedups, [*cell, "bench_model", "ln_sum", "runs"])}


def assert_rollups_match(store) -> dict[str, int]:
    """Every rollup equals the raw rows' aggregate; returns the rollups' row counts."""
    sizes = {}
    with store.read() as con:
        for table, (want, cols) in _expected(con).items():
            got = _raw(con, table)
            for col in ("day", "month"):
                if col in got:
                    got[col] = pd.to_datetime(got[col]).dt.strftime("%Y-%m-%d")
            for col in ("first_seen", "last_seen", "first_run", "last_run"):
                if col in got:
                    got[col] = pd.to_datetime(got[col]).dt.strftime("%Y-%m-%d %H:%M:%S.%f")
            if "week" in got:
                got["week"] = pd.to_datetime(got["week"]).dt.strftime("%Y-%m-%d")
            for col in ("vals", "spreads"):
                if col in got:   # a DOUBLE[] as the expected frame writes it
                    got[col] = got[col].map(lambda v: None if v is None else "|".join(repr(float(x)) for x in v) or None)
            if table == "rollup_week_bench":
                for col in ("speedup_ln", "compile_s", "memory_ln"):
                    got[col] = got[col].astype(float).round(6)
                got["labels"] = got["labels"].map("|".join)
            if table in ("rollup_compile_time", "rollup_day_compile_time", "rollup_month_compile_time"):
                for col in _SECONDS:
                    if col in got:
                        got[col] = got[col].astype(float).round(6)
            for col, places in (("compile_s", 6), ("steady_ms", 6), ("ln_sum", 9)):
                if col in got:
                    got[col] = got[col].astype(float).round(places)
            assert len(got) == len(want), (table, len(got), len(want))
            pd.testing.assert_frame_equal(_key(got, cols), _key(want, cols), obj=table)
            sizes[table] = len(got)
        for table, raw in (("rollup_graph_breaks", "graph_breaks"), ("rollup_recompiles", "recompiles"),
                           ("rollup_guard_failures", "guard_failures"), ("rollup_limit_hits", "limit_hits"),
                           ("rollup_compile_time", "compiles")):
            col = "compiles" if table == "rollup_compile_time" else "n"
            total, n_raw = con.execute(f"SELECT (SELECT coalesce(sum({col}), 0) FROM {table}), "
                                       f"(SELECT count(*) FROM {raw})").fetchall()[0]
            assert total == n_raw, (table, total, n_raw)
        sizes["rollup_month_storms"] = _assert_month_storms(con)
    return sizes


def _assert_month_storms(con) -> int:
    """The storms level (store/month_storms.py) holds each month cell's top rows, in the storms
    order, of the storm rows of every run (whose per-run rollups are checked against the raw rows
    above); returns its row count."""
    cell = ["month", "model", "hardware", "torch_version"]
    rows = con.execute(f"""
        SELECT date_trunc('month', d.day)::DATE AS month, d.model, d.hardware, d.torch_version, s.*
        FROM rollup_day_runs d JOIN ({month_storms.storm_rows("(SELECT r.run_id, "
                                                             "coalesce(r.started_at, r.ingested_at) AS run_time "
                                                             "FROM runs r)")}) s USING (run_id)
        ORDER BY {month_storms.ORDER}""").df()
    want = rows.groupby(cell, dropna=False, sort=False).head(month_storms.ROWS_PER_CELL)
    got = con.execute(f"SELECT * FROM rollup_month_storms ORDER BY {month_storms.ORDER}").df()
    cols = [*cell, *month_storms.COLUMNS]
    assert len(got) == len(want) > 0, (len(got), len(want))
    pd.testing.assert_frame_equal(_key(got, cols), _key(want, cols), obj="rollup_month_storms")
    return len(got)


def _cli(args, env=None, **kw):
    return subprocess.Popen([sys.executable, "-m", "compilewatch", *map(str, args)], cwd=REPO,
                            env=env or os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _run(args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compilewatch", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_rollups_equal_raw_after_ingest_duplicates_kill_reingest_and_backfill(tmp_path):
    db = tmp_path / "a" / "cw.duckdb"
    store = open_store(db)
    # a worker killed mid-ingest: some files committed, one in flight
    worker = _cli(["ingest", "--quiet", "--db", db, *INPUTS])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with store.read(timeout=0.5) as con:
                if con.execute("SELECT count(*) FROM files").fetchall()[0][0] >= 2:
                    break
        except Exception:   # the worker holds the writer lock: look again
            pass
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    store = open_store(db)
    with store.read() as con:
        stored_before = con.execute("SELECT count(*) FROM files").fetchall()[0][0]
    assert stored_before >= 2
    assert_rollups_match(store)

    # the rerun stores the rest; a second, duplicate ingest changes nothing
    assert _run(["ingest", "--quiet", "--db", db, *INPUTS]).returncode == 0
    sizes = assert_rollups_match(store)
    assert all(n > 0 for n in sizes.values()), sizes
    r = _run(["ingest", "--db", db, *INPUTS])
    assert r.returncode == 0 and re.search(r"^0 stored, \d+ duplicate", r.stdout, re.M), r.stdout
    assert assert_rollups_match(store) == sizes

    # a clean ingest of the same inputs holds the same rollups
    clean = open_store(tmp_path / "clean" / "cw.duckdb")
    assert ingest_paths(clean, INPUTS).ok
    assert assert_rollups_match(clean) == sizes

    # every file parsed again: rows replaced, rollups rebuilt
    r = _run(["reingest", "--all", "--db", db])
    assert r.returncode == 0, r.stderr
    assert assert_rollups_match(store) == sizes

    # an existing store from before the rollups: the migration backfills them
    with store.write() as con:
        for t in ("rollup_graph_breaks", "rollup_recompiles", "rollup_guard_failures", "rollup_limit_hits",
                  "rollup_compile_time", "review_snapshots", "review_rows", "rollup_day_runs",
                  "rollup_day_guard_failures", "rollup_day_recompiles", "rollup_day_compile_time",
                  "rollup_day_graph_breaks", "rollup_run_totals", "rollup_steps", "rollup_month_guard_failures",
                  "rollup_month_recompiles", "rollup_month_compile_time", "rollup_month_graph_breaks",
                  "rollup_frame_fingerprints", "rollup_month_storms", "rollup_day_run_totals",
                  "rollup_day_speedups", "rollup_month_run_totals", "rollup_month_speedups",
                  "rollup_day_linkage", "rollup_day_linkage_bins", "rollup_month_linkage",
                  "rollup_month_linkage_bins",
                  "rollup_week_bench", *compare_cells.TABLES):
            con.execute(f"DROP TABLE {t}")
        # and from before 018 (its backfill builds the compile-time rollups) and 020 (fingerprints)
        con.execute("DROP TABLE later_compile_metrics")
        for col in ("time_to_first_step_s", "first_step_source"):
            con.execute(f"ALTER TABLE timing_summaries DROP COLUMN {col}")
        con.execute("ALTER TABLE artifacts DROP COLUMN fp")
        con.execute("DELETE FROM _migrations WHERE name IN ('009_rollups_review.sql', '010_day_rollups.sql', "
                    "'011_day_graph_breaks.sql', '012_run_totals.sql', '013_step_rollup.sql', "
                    "'014_month_rollups.sql', '018_compile_total.sql', '020_frame_fingerprints.sql', "
                    "'026_month_storms.sql', '027_bench_weeks.sql', '028_overview_rollups.sql', "
                    "'029_linkage_rollups.sql', '030_compare_cells.sql')")
    assert assert_rollups_match(open_store(db)) == sizes


def test_a_rebuild_of_every_run_in_slices_equals_raw(tmp_path, monkeypatch):
    """A full rebuild (backfill, reingest --all) sums the runs a slice at a time, so a team-year store
    fits DuckDB's memory; with one slice per run every run still lands in exactly one slice."""
    store = open_store(tmp_path / "s" / "cw.duckdb")
    assert ingest_paths(store, INPUTS).ok
    sizes = assert_rollups_match(store)
    monkeypatch.setattr(run_filter, "RUNS_PER_STATEMENT", 1)
    with store.write() as con:
        rollups.refresh_rollups(con)
    assert assert_rollups_match(store) == sizes


def test_a_rebuild_of_every_run_caps_its_temp_files_then_puts_the_settings_back(tmp_path):
    """While every run is rebuilt (a backfill, refresh_all) DuckDB's temp files are capped and it
    need not keep insertion order (store/derived.py: REBUILD_SETTINGS); the writer's own settings
    are back afterwards."""
    from compilewatch.store import derived

    def now(con):
        return {k: con.execute(f"SELECT current_setting('{k}')").fetchall()[0][0]
                for k in ("max_temp_directory_size", "preserve_insertion_order")}
    store = open_store(tmp_path / "cw.duckdb")
    with store.write() as con:
        before = now(con)
        with derived.rebuilding(con):
            assert now(con) == {"max_temp_directory_size": "8.0 GiB", "preserve_insertion_order": False}
        assert now(con) == before and before["preserve_insertion_order"] is True


def test_rollups_equal_raw_after_store_copy_both_ways(tmp_path, lake_spec):
    first = tmp_path / "first" / "cw.duckdb"
    src = open_store(first)
    assert ingest_paths(src, INPUTS).ok
    sizes = assert_rollups_match(src)
    data = tmp_path / "lake-data"
    r = _run(["store", "copy", "--from", first, "--to", lake_spec, "--to-data-path", data])
    assert r.returncode == 0, r.stderr
    lake = open_store(lake_spec, data)
    try:
        assert assert_rollups_match(lake) == sizes
        back = tmp_path / "back" / "cw.duckdb"
        r = _run(["store", "copy", "--from", lake_spec, "--from-data-path", data, "--to", back])
        assert r.returncode == 0, r.stderr
        assert assert_rollups_match(open_store(back)) == sizes
        # the copy goes on being written: an ingest into the lake keeps its rollups right
        assert ingest_paths(lake, [MORE]).ok
        grown = assert_rollups_match(lake)
        assert grown != sizes
    finally:
        lake.close()


def test_day_rollups_follow_a_run_that_moves_to_another_cell(tmp_path):
    """Two logs of one job (--run-id), the second ingested with --model: the run's model fills in,
    so its rows leave the model-less cell for the model's; the old cell must not keep them."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [TEXTS[0]], run_id="job-1").ok
    assert_rollups_match(store)
    with store.read() as con:
        assert con.execute("SELECT model FROM rollup_day_runs WHERE run_id = 'job-1'").fetchall() == [(None,)]
    assert ingest_paths(store, [TRACES[0]], run_id="job-1", model="resnet50").ok
    sizes = assert_rollups_match(store)
    with store.read() as con:
        assert con.execute("SELECT model FROM rollup_day_runs WHERE run_id = 'job-1'").fetchall() == [("resnet50",)]
        for table in ("rollup_day_guard_failures", "rollup_day_recompiles", "rollup_day_compile_time",
                      "rollup_day_graph_breaks", "rollup_month_guard_failures", "rollup_month_recompiles",
                      "rollup_month_compile_time", "rollup_month_graph_breaks", "rollup_day_run_totals",
                      "rollup_day_speedups", "rollup_month_run_totals", "rollup_month_speedups"):
            assert con.execute(f"SELECT count(*) FROM {table} WHERE model IS NULL").fetchall()[0][0] == 0, table
    assert sizes["rollup_day_compile_time"] > 0


def test_bench_weeks_follow_a_run_that_moves_to_another_week(tmp_path):
    """A bundle's bench.csv ingested alone first, into the bundle's run (--run-id): the run has no
    start time, torch version or hardware yet, so its bench rows lie in the week it was ingested.
    The bundle's other files then fill them in from its manifest (2026-11-22, torch 2.13, CPU): the
    rows move to that week's cell, and the cell they left must not keep them."""
    import tarfile

    from compilewatch.ingest.bundle import read_manifest
    bundle = tmp_path / "bundle"
    with tarfile.open(BUNDLES[0]) as tf:
        tf.extractall(bundle, filter="data")
    (folder,) = bundle.iterdir()
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [TRACES[0]]).ok    # a run with events beside it: what the checks compare
    assert ingest_paths(store, [folder / "bench.csv"], run_id=read_manifest(folder).run_id).ok
    assert_rollups_match(store)
    with store.read() as con:
        before = con.execute("SELECT week, hardware, torch_version FROM rollup_week_bench").fetchall()
    assert ingest_paths(store, [folder]).ok
    sizes = assert_rollups_match(store)
    with store.read() as con:
        after = con.execute("SELECT week, hardware, torch_version FROM rollup_week_bench").fetchall()
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    assert len(before) == len(after) == sizes["rollup_week_bench"] == 1 and before != after, (before, after)
    assert after[0][2] == "2.13.0+cpu"


def test_pages_read_from_the_day_and_month_levels_equal_the_raw_counts(tmp_path):
    """The hotspot, recompile and compile-time tables read the day and month rollups: their
    occurrences, failures, runs, models and functions equal the counts over the raw rows, over every
    run (month rollups), one day (day rollups), and windows of whole and partial months (both)."""
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import compile_time, hotspots, recompiles

    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, INPUTS).ok
    with store.read() as con:
        gf = _raw(con, "guard_failures").merge(
            con.execute("SELECT run_id, coalesce(started_at, ingested_at)::DATE AS day FROM runs").df(), on="run_id")
        c = _raw(con, "compiles").merge(
            con.execute("SELECT run_id, coalesce(started_at, ingested_at)::DATE AS day FROM runs").df(), on="run_id")
        gb = _with_break_key(_raw(con, "graph_breaks")).merge(con.execute(
            "SELECT run_id, model, coalesce(started_at, ingested_at) AS t, t::DATE AS day FROM runs").df(), on="run_id")
        days = sorted(gf["day"].unique())
        first_day, last_day = pd.Timestamp(days[0]).date(), pd.Timestamp(days[-1]).date()
        first_month = first_day.replace(day=1)
        month_end = (pd.Timestamp(last_day) + pd.offsets.MonthEnd(0)).date()
        views = (
            (Filters(limit=1000), slice(None)),                                  # the month rollups alone
            (Filters(start=first_day, end=first_day, limit=1000), days[0]),       # the day rollups alone
            # whole months from the month rollups, the partial month before them from the day rollups
            (Filters(start=first_month - timedelta(days=17), end=month_end, limit=1000), slice(None)),
            # the partial month from the day rollups, the whole month after it from the month rollups
            (Filters(start=first_day, end=month_end + timedelta(days=31), limit=1000), slice(None)),
        )
        for f, keep in views:
            g = gf if keep == slice(None) else gf[gf["day"] == keep]
            got = recompiles.guard_categories(con, f).set_index("category")
            want = g.assign(category=g["category"].fillna("other")).groupby("category").agg(
                failures=("run_id", "size"), runs=("run_id", "nunique"), functions=("function", "nunique"))
            pd.testing.assert_frame_equal(got[["failures", "runs", "functions"]].sort_index(), want.sort_index(),
                                          check_dtype=False, check_names=False)
            got = recompiles.top_guards(con, f).set_index("guard")
            keyed = g[g["guard_key"].notna()]
            want = keyed.groupby("guard_key").agg(failures=("run_id", "size"), runs=("run_id", "nunique"))
            pd.testing.assert_frame_equal(got.loc[want.index, ["failures", "runs"]].sort_index(), want.sort_index(),
                                          check_dtype=False, check_names=False)
            cc = c if keep == slice(None) else c[c["day"] == keep]
            cc = cc[cc["co_name"].notna()]
            cc = cc.assign(code=cc["co_filename"].str.extract(r"([^/\\]*)$", expand=False) + ":"
                           + cc["co_firstlineno"].astype("Int64").astype(str))
            want = cc.groupby(["co_name", "code"]).agg(compiles=("run_id", "size"), runs=("run_id", "nunique"))
            got = compile_time.frame_hotspots(con, f).set_index(["co_name", "code"])
            assert len(got) == len(want)
            pd.testing.assert_frame_equal(got.loc[want.index, ["compiles", "runs"]].sort_index(), want.sort_index(),
                                          check_dtype=False, check_names=False)
            versions = cc.merge(con.execute("SELECT run_id, coalesce(torch_version, 'unknown') AS v FROM runs").df(),
                                on="run_id").groupby("v").size()
            split = compile_time.phase_split(con, f)
            assert split.groupby("torch_version")["compiles"].first().sort_index().tolist() == versions.sort_index().tolist()
            top = compile_time.frame_versions(con, f, top=1000)
            assert top["compiles"].sum() == len(cc)
            bb = gb if keep == slice(None) else gb[gb["day"] == keep]
            want = bb.groupby("k").agg(occurrences=("run_id", "size"), runs=("run_id", "nunique"),
                                       models=("model", "nunique"), first_seen=("t", "min"), last_seen=("t", "max"))
            got = hotspots.hotspots(con, f).set_index("break_key")
            assert len(got) == len(want) > 0
            pd.testing.assert_frame_equal(got.loc[want.index, list(want.columns)].sort_index(), want.sort_index(),
                                          check_dtype=False, check_names=False)
            trend = hotspots.hotspot_trend(con, f, top=1000)
            assert trend["occurrences"].sum() == len(bb) and "other" not in set(trend["break_key"])
            # the top break per period, and the rest as "other", per period
            day = pd.to_datetime(bb["day"])
            period = day if f.window_days() <= 21 and f.start else day.dt.to_period("W-SUN").dt.start_time
            top_key = want.reset_index().sort_values(["occurrences", "k"], ascending=[False, True])["k"].iloc[0]
            expected = (bb.assign(period=period, break_key=bb["k"].where(bb["k"] == top_key, "other"))
                        .groupby(["period", "break_key"]).size().rename("occurrences").sort_index())
            trend = hotspots.hotspot_trend(con, f, top=1)
            got = trend.assign(period=pd.to_datetime(trend["period"])).set_index(["period", "break_key"])["occurrences"]
            pd.testing.assert_series_equal(got.sort_index(), expected, check_dtype=False, check_names=False)
