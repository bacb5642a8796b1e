"""Weekly review: this window against the one before, and what moved."""
from __future__ import annotations

from datetime import datetime, time

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import HARDWARE, RUN_TIME, df, geomean, run_where

# metric -> (label, which direction is better, unit)
METRICS = {
    "runs": ("Runs", None, ""),
    "models": ("Models", None, ""),
    "geomean_speedup": ("Speedup", "higher", "×"),
    "graph_breaks": ("Graph breaks", "lower", ""),
    "recompiles": ("Recompiles", "lower", ""),
    "compile_time_s": ("Compile time", "lower", "s"),
}
METRIC_HELP = {
    "geomean_speedup": "Compiled over eager: the geometric mean over models of each model's geomean speedup.",
    "compile_time_s": "Sum of entire-frame compile time over the window's runs.",
    "graph_breaks": "Graph-break events in the window's runs.",
    "recompiles": "Recompiles in the window's runs.",
}
# Changes inside ±5% are noise, as on PyTorch's HUD.
NOISE_PCT = 5.0


def _per_run_cte(f: Filters) -> tuple[str, list]:
    """Runs of the current and previous window with their per-run totals, tagged win = current|previous."""
    prev = f.previous_window()
    both = f.replace(start=prev.start if f.end else f.start)
    where, params = run_where(both)
    cur_start = datetime.combine(f.start, time.min) if f.start else datetime(1970, 1, 1)
    sql = f"""
    w AS (SELECT r.run_id, r.model, {HARDWARE} AS hardware,
                 CASE WHEN {RUN_TIME} >= ? THEN 'current' ELSE 'previous' END AS win
          FROM runs r WHERE {where}),
    sp AS (SELECT b.run_id, coalesce(b.model, w.model) AS model, {geomean('b.speedup')} AS g
           FROM bench_results b JOIN w USING (run_id) GROUP BY ALL),
    -- each run's totals kept at ingest (store/rollups.py), not the events: a row a run
    pr AS (SELECT w.run_id, w.model, w.hardware, w.win, coalesce(t.graph_breaks, 0) AS breaks,
                  coalesce(t.recompiles, 0) AS recompiles, t.compile_s
           FROM w LEFT JOIN rollup_run_totals t USING (run_id))
    """
    return sql, [cur_start] + params


# Timings only compare on one kind of hardware: a geomean over a CPU's and a GPU's speedups, or a
# sum of their compile times, describes no machine.
PER_HARDWARE = {"geomean_speedup", "compile_time_s"}


def kpis(con, f: Filters) -> pd.DataFrame:
    """One row per metric: label, current, previous, change_pct, better (higher|lower|None), unit,
    and hardware: the kinds of hardware behind the figure. The speedup and compile time are given
    only when both windows ran on one kind of hardware (None otherwise; `hardware` lists the kinds)."""
    cte, params = _per_run_cte(f)
    sql = f"""
    WITH {cte},
    spm AS (SELECT w.win, sp.model, {geomean('sp.g')} AS g FROM sp JOIN w USING (run_id) GROUP BY ALL),
    spw AS (SELECT win, {geomean('g')} AS geomean_speedup FROM spm GROUP BY win),
    agg AS (SELECT win, count(*) AS runs, count(DISTINCT model) AS models, sum(breaks) AS graph_breaks,
                   sum(recompiles) AS recompiles, sum(compile_s) AS compile_time_s
            FROM pr GROUP BY win)
    SELECT win, runs, models, spw.geomean_speedup, graph_breaks, recompiles, compile_time_s,
           (SELECT list(DISTINCT hardware ORDER BY hardware) FROM pr) AS hardware
    FROM agg LEFT JOIN spw USING (win)
    """
    wide = df(con, sql, params).set_index("win")
    kinds = list(wide["hardware"].iloc[0]) if len(wide) else []
    rows = []
    for key, (label, better, unit) in METRICS.items():
        cur = wide.at["current", key] if "current" in wide.index else None
        prev = wide.at["previous", key] if "previous" in wide.index else None
        cur = None if pd.isna(cur) else float(cur)
        prev = None if pd.isna(prev) else float(prev)
        if key in PER_HARDWARE and len(kinds) > 1:
            cur = prev = None
        change = 100.0 * (cur / prev - 1) if cur is not None and prev not in (None, 0.0) else None
        rows.append({"metric": key, "label": label, "current": cur, "previous": prev,
                     "change_pct": change, "better": better, "unit": unit, "hardware": kinds})
    return pd.DataFrame(rows)


def daily(con, f: Filters) -> pd.DataFrame:
    """Per day of the current and previous window: runs, graph breaks, recompiles."""
    cte, params = _per_run_cte(f)
    sql = f"""
    WITH {cte}
    SELECT date_trunc('day', {RUN_TIME}) AS day, pr.win, count(*) AS runs, sum(pr.breaks) AS graph_breaks,
           sum(pr.recompiles) AS recompiles
    FROM pr JOIN runs r USING (run_id) GROUP BY ALL ORDER BY day
    """
    return df(con, sql, params)
