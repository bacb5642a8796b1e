"""Weekly review: this window against the one before, and what moved.

The KPIs and the daily activity have two paths to the same figures: the per-run path reads every run
of both windows (its runs row, its totals, its bench rows); the cell path reads the Overview's rollups
(migrations/028_overview_rollups.sql), whole months from the month level and the partial months'
days from the day level (app/cells.py). from_cells picks one."""
from __future__ import annotations

from datetime import datetime, time

import pandas as pd

from compilewatch.app.cells import cell_where, window_rows
from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import HARDWARE, RUN_TIME, df, geomean, run_where
from compilewatch.store.run_speedups import run_speedups

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


# Windows this long or longer read the cells: from 28 days a window can hold a whole month, which
# the month cells give in a row per model, hardware and torch version however many runs it held,
# where the per-run path reads every run of both windows and grows with them (docs/PERFORMANCE.md
# has the figures). A shorter window keeps the per-run path: cheap there, and the reference the
# cells are tested against.
CELLS_FROM_DAYS = 28


def from_cells(f: Filters) -> bool:
    """Whether kpis and daily read the cells rather than every run: the one place that chooses. Every
    filter they take (models, torch versions, labels, hardware, the window's days) is part of a day
    cell, and the two windows meet on a day boundary, so the cells of each window hold exactly its
    runs; a window open on either side keeps the per-run path, whose split it defines."""
    return bool(f.start and f.end) and f.window_days() >= CELLS_FROM_DAYS


def _windows(f: Filters) -> tuple[tuple[str, Filters], ...]:
    """The current window and the previous one, as _per_run_cte tags them for a window with both
    bounds: the previous one ends the day before f.start."""
    return ("current", f), ("previous", f.previous_window())


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
    sp AS ({run_speedups('w')}),
    -- each run's totals kept at ingest (store/rollups.py), not the events: a row a run
    pr AS (SELECT w.run_id, w.model, w.hardware, w.win, coalesce(t.graph_breaks, 0) AS breaks,
                  coalesce(t.recompiles, 0) AS recompiles, t.compile_s
           FROM w LEFT JOIN rollup_run_totals t USING (run_id))
    """
    return sql, [cur_start] + params


def _per_run_kpis(f: Filters) -> tuple[str, list]:
    """spm (win, model, g: the model's geomean speedup), agg (win and its counts and sums) and kinds
    (the hardware of both windows) from every run of both windows."""
    cte, params = _per_run_cte(f)
    return f"""{cte},
    spm AS (SELECT w.win, sp.bench_model AS model, {geomean('sp.g')} AS g FROM sp JOIN w USING (run_id) GROUP BY ALL),
    agg AS (SELECT win, count(*) AS runs, count(DISTINCT model) AS models, sum(breaks) AS graph_breaks,
                   sum(recompiles) AS recompiles, sum(compile_s) AS compile_time_s
            FROM pr GROUP BY win),
    kinds AS (SELECT list(DISTINCT hardware ORDER BY hardware) AS hardware FROM pr)""", params


def _window_cells(kind: str, f: Filters, columns: str) -> tuple[str, list]:
    """``columns`` of the rollup rows of ``kind`` of both windows (app/cells.py: window_rows), tagged win."""
    parts, params = [], []
    for win, w in _windows(f):
        rows, p = window_rows(kind, w, columns)
        parts.append(f"SELECT '{win}' AS win, * FROM {rows}")
        params += p
    return " UNION ALL ".join(parts), params


def _cell_kpis(f: Filters) -> tuple[str, list]:
    """spm, agg and kinds as _per_run_kpis gives them, from the cells: counts and sums add up over
    cells, a cell lists its model and hardware, and a model's geomean over the runs is exp of their
    logarithms' sum over their count, each summed over the cells."""
    totals, params = _window_cells("run_totals", f, "model, hardware, runs, graph_breaks, recompiles, compile_s")
    speedups, more = _window_cells("speedups", f, "bench_model, ln_sum, runs")
    return f"""
    rt AS ({totals}),
    sl AS ({speedups}),
    spm AS (SELECT win, bench_model AS model, exp(sum(ln_sum) / sum(runs)) AS g FROM sl GROUP BY ALL),
    agg AS (SELECT win, sum(runs) AS runs, count(DISTINCT model) AS models, sum(graph_breaks) AS graph_breaks,
                   sum(recompiles) AS recompiles, sum(compile_s) AS compile_time_s
            FROM rt GROUP BY win),
    kinds AS (SELECT list(DISTINCT hardware ORDER BY hardware) AS hardware FROM rt)""", params + more


# Timings only compare on one kind of hardware: a geomean over a CPU's and a GPU's speedups, or a
# sum of their compile times, describes no machine.
PER_HARDWARE = {"geomean_speedup", "compile_time_s"}


def kpis(con, f: Filters) -> pd.DataFrame:
    """One row per metric: label, current, previous, change_pct, better (higher|lower|None), unit,
    and hardware: the kinds of hardware behind the figure. The speedup and compile time are given
    only when both windows ran on one kind of hardware (None otherwise; `hardware` lists the kinds)."""
    cte, params = (_cell_kpis if from_cells(f) else _per_run_kpis)(f)
    sql = f"""
    WITH {cte},
    spw AS (SELECT win, {geomean('g')} AS geomean_speedup FROM spm GROUP BY win)
    SELECT win, runs, models, spw.geomean_speedup, graph_breaks, recompiles, compile_time_s,
           (SELECT hardware FROM kinds) AS hardware
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
    if from_cells(f):   # the day cells, each of one day: a day's figures are its cells' sums
        parts, params = [], []
        for win, w in _windows(f):
            where, p = cell_where(w)
            parts.append(f"SELECT '{win}' AS win, d.day, d.runs, d.graph_breaks, d.recompiles "
                         f"FROM rollup_day_run_totals d WHERE {where}")
            params += p
        sql = f"""
        SELECT day::TIMESTAMP AS day, win, sum(runs)::BIGINT AS runs, sum(graph_breaks) AS graph_breaks,
               sum(recompiles) AS recompiles
        FROM ({" UNION ALL ".join(parts)}) GROUP BY ALL ORDER BY day
        """
        return df(con, sql, params)
    cte, params = _per_run_cte(f)
    sql = f"""
    WITH {cte}
    SELECT date_trunc('day', {RUN_TIME}) AS day, pr.win, count(*) AS runs, sum(pr.breaks) AS graph_breaks,
           sum(pr.recompiles) AS recompiles
    FROM pr JOIN runs r USING (run_id) GROUP BY ALL ORDER BY day
    """
    return df(con, sql, params)
