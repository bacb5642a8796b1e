"""Recompile storms: recompiles per run and function, storms flagged, guard failures ranked. Read
from the rollups kept at ingest: per run (store/rollups.py) and the stormiest rows per month cell
(store/month_storms.py) for the storms, per day or month cell (store/day_rollups.py,
store/month_rollups.py) for the views over the whole window; the raw recompiles only for one run's
timeline."""
from __future__ import annotations

from datetime import datetime, time

import pandas as pd

from compilewatch.app.cells import cell_where, whole_months, window_rows
from compilewatch.app.filters import Filters, key_clauses
from compilewatch.app.queries.common import df, runs_cte
from compilewatch.review.hints import guard_hint
from compilewatch.store import month_storms
from compilewatch.store.month_storms import BURST_PER_MINUTE, MANY_RECOMPILES
from compilewatch.store.run_rows import run_filter


def storms(con, f: Filters) -> pd.DataFrame:
    """One row per (run, function): recompiles, limit hits, the worst one-minute burst, the top
    guard-failure category, storm flag and why. Storms first, then most recompiles; f.limit rows.
    A window's whole months come from the storms level (store/month_storms.py) when every filter is
    part of a month cell; its partial months, and any other filter, from the per-run rollups."""
    cte, params = runs_cte(f)
    edge, candidates, cand_params = _storm_candidates(f)
    sql = f"""
    WITH {cte}, {edge},
    top AS (SELECT * FROM {candidates} c ORDER BY {month_storms.ORDER} LIMIT ?),
    -- guard categories only for the rows shown; the top category is the mode of the failures (the
    -- first by name among equals, so that the same rows always name the same one)
    gc AS (SELECT g.run_id, coalesce(g.function, '?') AS function, g.category, sum(g.n) AS n
           FROM rollup_guard_failures g WHERE g.run_id IN (SELECT run_id FROM top) GROUP BY ALL),
    gf AS (SELECT run_id, function,
                  first(category ORDER BY n DESC, category) FILTER (WHERE category IS NOT NULL) AS top_category,
                  sum(n)::BIGINT AS guard_failures
           FROM gc GROUP BY ALL)
    SELECT top.run_id, top.model, top.torch_version, top.run_time, top.function, top.file, top.line,
           top.recompiles, top.limit_hits, top.limit_name, top.burst,
           top.last_ts - top.first_ts AS span_s,
           gf.top_category, coalesce(gf.guard_failures, 0) AS guard_failures, top.storm,
           concat_ws('; ',
               CASE WHEN top.limit_hits > 0 THEN 'hit ' || coalesce(top.limit_name, 'the recompile limit') END,
               CASE WHEN top.recompiles >= ? THEN top.recompiles || ' recompiles' END,
               CASE WHEN top.burst >= ? THEN top.burst || ' within a minute' END) AS why
    FROM top LEFT JOIN gf USING (run_id, function)
    ORDER BY {month_storms.ORDER}
    """
    extra = [int(f.limit), MANY_RECOMPILES, BURST_PER_MINUTE]
    return df(con, sql, params + cand_params + extra)


_STORM_PART = "function, file, line, recompiles, limit_hits, limit_name, burst, first_ts, last_ts, storm"


def _storm_candidates(f: Filters) -> tuple[str, str, list]:
    """(CTE ``edge``, relation, params): storm rows (run_id, model, torch_version, run_time,
    function, ... storm) that hold the window's top f.limit. The whole months' rows come from the
    storms level and ``edge``, the filtered runs (``fr``) of the partial months, row by row; when a
    filter is not part of a month cell, or more rows are asked for than the level keeps per cell,
    ``edge`` is every filtered run."""
    months = None if f.labels or f.limit > month_storms.ROWS_PER_CELL else whole_months(f)
    per_run = f"SELECT run_id, model, torch_version, run_time, {_STORM_PART} FROM ({month_storms.storm_rows('edge')})"
    if months is None:
        return "edge AS (SELECT * FROM fr)", f"({per_run})", []
    first, after = months
    inside = [(c, v) for c, v in (("{0} >= ?", first), ("{0} < ?", after)) if v is not None]
    keys, params = key_clauses(f, lambda col: f"d.{col}")
    level_where = " AND ".join([*keys, *(c.format("d.month") for c, _ in inside)]) or "TRUE"
    params += [v for _, v in inside]
    outside = f"NOT ({' AND '.join(c.format('run_time') for c, _ in inside)})" if inside else "FALSE"
    edge = f"edge AS (SELECT * FROM fr WHERE {outside})"
    sql = (f"SELECT d.run_id, d.model, d.torch_version, d.run_time, {_STORM_PART} "
           f"FROM rollup_month_storms d WHERE {level_where} UNION ALL {per_run}")
    # the edge's parameters come first: its CTE precedes the relation in the query
    return edge, f"({sql})", [datetime.combine(v, time.min) for _, v in inside] + params


def storm_run(con, f: Filters) -> str | None:
    """f.run_id, else the filtered run with the most recompiles (the timeline's default)."""
    if f.run_id:
        return f.run_id
    cte, params = runs_cte(f)
    row = df(con, f"WITH {cte} SELECT t.run_id FROM rollup_run_totals t JOIN fr USING (run_id) "
                  f"WHERE t.recompiles > 0 ORDER BY t.recompiles DESC, 1 LIMIT 1", params)
    return None if row.empty else str(row.iloc[0, 0])


def timeline(con, f: Filters) -> pd.DataFrame:
    """Every recompile of one run (f.run_id, else the stormiest filtered run), in order: function,
    seconds since the run's first recompile (t_s; null when the log has no timestamps), seq,
    cumulative count per function, and the first guard failure's category. At most 5,000 rows."""
    run_id = storm_run(con, f)
    if run_id is None:
        return pd.DataFrame(columns=["run_id", "function", "seq", "t_s", "cumulative", "category", "reason", "compile_id"])
    run = run_filter(con, run_id)
    sql = f"""
    WITH rc AS (SELECT * FROM recompiles WHERE {run}),
    g AS (SELECT file_id, recompile_no, arg_min(category, line_no) AS category
          FROM guard_failures WHERE {run} GROUP BY ALL)
    SELECT rc.run_id, coalesce(rc.function, '?') AS function, rc.compile_id,
           row_number() OVER (ORDER BY rc.ts NULLS LAST, rc.file_id, rc.recompile_no, rc.line_no) AS seq,
           rc.ts - min(rc.ts) OVER () AS t_s,
           row_number() OVER (PARTITION BY coalesce(rc.function, '?')
                              ORDER BY rc.ts NULLS LAST, rc.file_id, rc.recompile_no, rc.line_no) AS cumulative,
           coalesce(g.category, 'unknown') AS category, left(rc.reason, 300) AS reason
    FROM rc LEFT JOIN g USING (file_id, recompile_no)
    ORDER BY seq LIMIT 5000
    """
    return df(con, sql, [run_id, run_id])


def recompiles_per_day(con, f: Filters) -> pd.DataFrame:
    """Per day of the filtered runs: recompiles, and guard failures split by category
    (columns day, category, recompiles; category "all recompiles" holds the recompile count).
    Read from the day rollups: every filter it takes is part of a cell."""
    where, params = cell_where(f)
    sql = f"""
    SELECT d.day::TIMESTAMP AS day, d.category, sum(d.n)::BIGINT AS recompiles
    FROM rollup_day_guard_failures d WHERE d.grain = 'category' AND {where} GROUP BY ALL
    UNION ALL
    SELECT d.day::TIMESTAMP, 'all recompiles', sum(d.n)::BIGINT
    FROM rollup_day_recompiles d WHERE {where} GROUP BY ALL
    ORDER BY 1, 3 DESC
    """
    return df(con, sql, params + params)


_GUARD_COLUMNS = "grain, category, guard, guard_key, function, n, runs, raw, source_name, expected, actual"


def guard_categories(con, f: Filters) -> pd.DataFrame:
    """Guard-failure categories ranked by failures: runs and functions affected, the most common
    guard (guard_key) with an example raw guard, and a fix hint. Read from the rollups: the
    failures and runs of a category from its 'category' rows (a run lies in one cell, so runs add
    up), the functions and the top guard from its 'key' rows (app/cells.py: window_rows)."""
    rows, params = window_rows("guard_failures", f, _GUARD_COLUMNS)
    sql = f"""
    WITH gf AS {rows},
    g AS (SELECT coalesce(d.category, 'other') AS category, d.function, d.guard_key, sum(d.n) AS n,
                 any_value(d.raw) AS raw
          FROM gf d WHERE d.grain = 'key' GROUP BY ALL),
    k AS (SELECT category, arg_max(guard_key, n) AS top_guard, arg_max(raw, n) AS example
          FROM (SELECT category, guard_key, sum(n) AS n, any_value(raw) AS raw FROM g GROUP BY ALL)
          GROUP BY category),
    fn AS (SELECT category, count(DISTINCT function) AS functions FROM g GROUP BY category),
    c AS (SELECT d.category, sum(d.n)::BIGINT AS failures, sum(d.runs)::BIGINT AS runs
          FROM gf d WHERE d.grain = 'category' GROUP BY ALL)
    SELECT category, c.failures, c.runs, fn.functions, k.top_guard, left(k.example, 300) AS example
    FROM c JOIN k USING (category) JOIN fn USING (category) ORDER BY failures DESC, category LIMIT 20
    """
    out = df(con, sql, params)
    out["hint"] = [guard_hint(c) for c in out["category"]]
    return out


def top_guards(con, f: Filters) -> pd.DataFrame:
    """The guards that fail most (grouped by number-free guard_key), with where and an example.
    Read from the rollups (app/cells.py: window_rows): runs from the guard's 'guard' rows, the rest
    from its 'key' rows."""
    rows, params = window_rows("guard_failures", f, _GUARD_COLUMNS)
    sql = f"""
    WITH gf AS {rows},
    g AS (SELECT d.guard, d.function, sum(d.n) AS n, any_value(d.category) AS category,
                 any_value(d.source_name) AS source_name, any_value(d.expected) AS expected,
                 any_value(d.actual) AS actual
          FROM gf d WHERE d.grain = 'key' GROUP BY 1, 2),
    r AS (SELECT d.guard, sum(d.runs)::BIGINT AS runs FROM gf d WHERE d.grain = 'guard' GROUP BY 1)
    SELECT guard, any_value(category) AS category, any_value(source_name) AS source_name,
           sum(n)::BIGINT AS failures, any_value(r.runs) AS runs,
           string_agg(DISTINCT function, ', ' ORDER BY function) AS functions,
           any_value(expected) AS expected, any_value(actual) AS actual
    FROM g LEFT JOIN r USING (guard) GROUP BY guard ORDER BY failures DESC, guard LIMIT ?
    """
    return df(con, sql, params + [int(f.limit)])
