"""Per-run values from the store: the runs with their hardware, each run's metric values, and the
keys (graph breaks, recompiling functions, guard categories, limit hits) each run had.

The per-run metrics are the store's ``run_metrics`` (run_id, metric, subject, value, unit,
direction, n, spread, source), which ingest derives from every source. Everything downstream sees
only these frames: series of per-run values in, verdicts out.
"""
from __future__ import annotations

import pandas as pd

from compilewatch.store.run_keys import HARDWARE, RUN_TIME


def df(con, sql: str, params: list | None = None) -> pd.DataFrame:
    """One query on its own cursor (connections are not thread-safe) -> DataFrame."""
    cur = con.cursor()
    try:
        return cur.execute(sql, params or []).df()
    finally:
        cur.close()


def records(frame: pd.DataFrame) -> list[dict]:
    """``frame.to_dict("records")`` with the same values, column by column: pandas boxes each cell of
    an Arrow-backed column on its own there, which costs more than the review's statistics."""
    columns = list(frame.columns)
    return [dict(zip(columns, row)) for row in zip(*(frame[c].tolist() for c in columns))]


def runs_relation(con) -> str:
    """``rv AS (...)``: run_id, model, hardware, torch_version, label, git_commit, run_time, command,
    started_at of every run, and ``bench``: whether `compilewatch bench` made it (its label is then
    the benchmark's mode/task, a configuration, not a version)."""
    return (f"rv AS (SELECT r.run_id, coalesce(r.model, '(no model)') AS model, {HARDWARE} AS hardware, "
            f"r.torch_version, r.label, r.git_commit, {RUN_TIME} AS run_time, r.command, r.started_at, "
            f"r.run_id IN (SELECT run_id FROM bench_results) AS bench "
            f"FROM runs r)")


def newest_run_time(con):
    row = df(con, f"SELECT max({RUN_TIME}) AS t FROM runs r")
    t = row.iloc[0, 0]
    return None if pd.isna(t) else pd.Timestamp(t).to_pydatetime()


def select_runs(con, where: str, params: list) -> pd.DataFrame:
    """Runs matching a WHERE over ``rv``, oldest first."""
    return df(con, f"WITH {runs_relation(con)} SELECT rv.* FROM rv WHERE {where} "
                   f"ORDER BY rv.run_time, rv.run_id", params)


def _ids_param(run_ids) -> list:
    return [list(map(str, run_ids))]


METRIC_COLUMNS = ["run_id", "metric", "subject", "value", "unit", "direction", "n", "spread", "source"]


def run_values(con, run_ids) -> pd.DataFrame:
    """Long form: run_id, metric, subject, value, unit, direction, n, spread, source for the runs,
    from run_metrics (derived by ingest from every source, store/run_metrics.py)."""
    if not len(run_ids):
        return pd.DataFrame(columns=METRIC_COLUMNS)
    return df(con, "SELECT run_id, metric, coalesce(subject, '') AS subject, value, unit, direction, n, spread, "
                   "source FROM run_metrics WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND value IS NOT NULL",
              [list(map(str, run_ids))])


# -- keys: what each run had, for the "new since the baseline" rules and their evidence ---------------
# Read from the rollups kept at ingest (store/rollups.py: one row per run and key), not the events.


def break_keys(con, run_ids) -> pd.DataFrame:
    """Per run and break key: count, type, reason, explanation, hints and the user's file:line."""
    return df(con, """
        SELECT run_id, break_key AS key, n AS count, gb_type, reason, raw_reason, hints, user_file, user_line,
               user_function
        FROM rollup_graph_breaks WHERE run_id IN (SELECT unnest(?::VARCHAR[]))""", _ids_param(run_ids))


def recompile_keys(con, run_ids) -> pd.DataFrame:
    """Per run and recompiling function: recompiles, where, and the first failed guard with its category."""
    return df(con, """
        WITH g AS (SELECT run_id, coalesce(function, '?') AS function, category, sum(n) AS n,
                          min(first_line_no) AS first_line_no, arg_min(first_raw, first_line_no) AS first_raw
                   FROM rollup_guard_failures WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL),
        gf AS (SELECT run_id, function, arg_max(category, n) FILTER (WHERE category IS NOT NULL) AS category,
                      arg_min(first_raw, first_line_no) AS guard
               FROM g GROUP BY ALL)
        SELECT rc.run_id, rc.function AS key, rc.n AS count, rc.file, rc.line,
               coalesce(gf.guard, rc.first_reason) AS guard, gf.category
        FROM rollup_recompiles rc LEFT JOIN gf USING (run_id, function)
        WHERE rc.run_id IN (SELECT unnest(?::VARCHAR[]))""", _ids_param(run_ids) * 2)


def guard_category_keys(con, run_ids) -> pd.DataFrame:
    """Per run and guard-failure category: count, an example function and failed guard."""
    return df(con, """
        SELECT run_id, coalesce(category, 'other') AS key, sum(n)::BIGINT AS count,
               arg_min(coalesce(function, '?'), first_line_no) AS function, arg_min(first_raw, first_line_no) AS guard
        FROM rollup_guard_failures WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", _ids_param(run_ids))


def limit_keys(con, run_ids) -> pd.DataFrame:
    """Per run, function and limit: hits, where, and the reason torch gave."""
    return df(con, """
        SELECT run_id, coalesce(function, '?') || ' (' || coalesce(limit_name, 'limit') || ')' AS key,
               sum(n)::BIGINT AS count, any_value(function) AS function, any_value(limit_name) AS limit_name,
               any_value(limit_value) AS limit_value, any_value(file) AS file, any_value(line) AS line,
               any_value(reason) AS reason
        FROM rollup_limit_hits WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", _ids_param(run_ids))


def cudagraph_skip_keys(con, run_ids) -> pd.DataFrame:
    """Per run and CUDA-graph skip (category at the user code it points at): skips, reason, where."""
    return df(con, """
        SELECT run_id, category || coalesce(' @ ' || regexp_extract(user_file, '[^/\\\\]+$') || ':' || user_line, '') AS key,
               count(*) AS count, any_value(category) AS category, any_value(reason) AS reason,
               any_value(user_file) AS user_file, any_value(user_line) AS user_line,
               any_value(user_function) AS user_function, any_value(user_code) AS user_code
        FROM cudagraph_events WHERE event = 'skip' AND run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""",
              _ids_param(run_ids))
