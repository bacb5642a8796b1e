"""Per-run values from the store: the runs with their hardware, each run's metric values, and the
keys (graph breaks, recompiling functions, guard categories, limit hits) each run had.

The per-run metrics come from the store's ``run_metrics`` (run_id, metric, subject, value, unit,
direction, n, spread, source) when the store has it; an older store gets the same columns from the
event tables here. Everything downstream sees only these frames: series of per-run values in,
verdicts out.
"""
from __future__ import annotations

import pandas as pd

# A run's time: when it started, or when it was ingested for loose logs that do not say.
RUN_TIME = "coalesce(r.started_at, r.ingested_at)"
# The hardware a run ran on, when the store has no `hardware` column: the GPU's name, else the
# manifest's device kind. Runs whose hardware is unknown form a group of their own.
_HARDWARE_FALLBACK = ("coalesce(r.gpu_name, CASE WHEN json_extract_string(r.manifest_json, '$.device') "
                      "LIKE 'cpu%' THEN 'CPU' WHEN json_extract_string(r.manifest_json, '$.device') "
                      "LIKE 'cuda%' THEN 'GPU' END, 'unknown hardware')")


def df(con, sql: str, params: list | None = None) -> pd.DataFrame:
    """One query on its own cursor (connections are not thread-safe) -> DataFrame."""
    cur = con.cursor()
    try:
        return cur.execute(sql, params or []).df()
    finally:
        cur.close()


def _columns(con, table: str) -> set[str]:
    rows = df(con, "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])
    return set(rows["column_name"])


def has_relation(con, name: str) -> bool:
    return not df(con, "SELECT 1 FROM information_schema.tables WHERE table_name = ?", [name]).empty


# The hardware key on a store with migration 002 (the dashboard's stores always have it).
HARDWARE = f"coalesce(r.hardware, {_HARDWARE_FALLBACK})"


def runs_relation(con) -> str:
    """``rv AS (...)``: run_id, model, hardware, torch_version, label, git_commit, run_time, command,
    started_at of every run. Uses the store's hardware key when it has one."""
    # runs ingested before the store had a hardware column keep it null: the fallback names theirs
    hardware = HARDWARE if "hardware" in _columns(con, "runs") else _HARDWARE_FALLBACK
    return (f"rv AS (SELECT r.run_id, coalesce(r.model, '(no model)') AS model, {hardware} AS hardware, "
            f"r.torch_version, r.label, r.git_commit, {RUN_TIME} AS run_time, r.command, r.started_at "
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


# The per-run metrics of a store without run_metrics: the same names, units and directions.
# Timing values are per-run medians with the IQR of the steps as spread; counts are 0 for a run
# that has compile logs and none of the events.
_DERIVED = """
WITH ids AS (SELECT unnest(?::VARCHAR[]) AS run_id),
logged AS (SELECT DISTINCT run_id FROM files WHERE kind IN ('torch_trace', 'torch_logs')
           AND run_id IN (SELECT run_id FROM ids)),
steady AS (SELECT run_id, callable, mode, duration_ms FROM step_timings
           WHERE run_id IN (SELECT run_id FROM ids) AND phase = 'steady'),
m AS (
  SELECT run_id, 'speedup' AS metric, coalesce(mode, '') || '/' || coalesce(task, '') AS subject,
         exp(avg(ln(CASE WHEN speedup > 0 THEN speedup END))) AS value, 'x' AS unit, 'higher' AS direction,
         count(*) AS n, NULL::DOUBLE AS spread, 'bench' AS source
  FROM bench_results WHERE run_id IN (SELECT run_id FROM ids) GROUP BY ALL
  UNION ALL
  SELECT run_id, 'step_time', callable, median(duration_ms), 'ms', 'lower', count(*),
         quantile_cont(duration_ms, 0.75) - quantile_cont(duration_ms, 0.25), 'hooks'
  FROM steady WHERE mode = 'compiled' GROUP BY ALL
  UNION ALL
  SELECT run_id, 'iteration_time', callable, median(duration_ms), 'ms', 'lower', count(*),
         quantile_cont(duration_ms, 0.75) - quantile_cont(duration_ms, 0.25), 'hooks'
  FROM steady WHERE mode = 'marked' GROUP BY ALL
  UNION ALL
  SELECT run_id, 'peak_memory', '', max(peak_mem_bytes)::DOUBLE, 'bytes', 'lower', count(*), NULL, 'hooks'
  FROM step_timings WHERE run_id IN (SELECT run_id FROM ids) AND peak_mem_bytes IS NOT NULL GROUP BY ALL
  UNION ALL
  SELECT run_id, 'compile_time', '', sum(entire_frame_compile_time_s), 's', 'lower', count(*), NULL, 'logs'
  FROM compiles WHERE run_id IN (SELECT run_id FROM ids) AND entire_frame_compile_time_s IS NOT NULL GROUP BY ALL
  UNION ALL
  SELECT l.run_id, 'graph_breaks', '', count(g.run_id)::DOUBLE, '', 'lower', NULL, NULL, 'logs'
  FROM logged l LEFT JOIN graph_breaks g USING (run_id) GROUP BY ALL
  UNION ALL
  SELECT l.run_id, 'recompiles', '', count(x.run_id)::DOUBLE, '', 'lower', NULL, NULL, 'logs'
  FROM logged l LEFT JOIN recompiles x USING (run_id) GROUP BY ALL
  UNION ALL
  SELECT l.run_id, 'limit_hits', '', count(x.run_id)::DOUBLE, '', 'lower', NULL, NULL, 'logs'
  FROM logged l LEFT JOIN limit_hits x USING (run_id) GROUP BY ALL
  UNION ALL
  SELECT l.run_id, 'failures', '', count(x.run_id)::DOUBLE, '', 'lower', NULL, NULL, 'logs'
  FROM logged l LEFT JOIN (SELECT run_id FROM compiles WHERE fail_type IS NOT NULL) x USING (run_id) GROUP BY ALL
  UNION ALL
  SELECT run_id, 'cache_hit_rate', '', avg(CASE WHEN outcome = 'hit' THEN 1.0 ELSE 0.0 END), 'ratio', 'higher',
         count(*), NULL, 'logs'
  FROM cache_events WHERE run_id IN (SELECT run_id FROM ids) AND outcome IN ('hit', 'miss') GROUP BY ALL
)
SELECT run_id, metric, subject, value, unit, direction, n, spread, source FROM m WHERE value IS NOT NULL
"""

METRIC_COLUMNS = ["run_id", "metric", "subject", "value", "unit", "direction", "n", "spread", "source"]


def run_values(con, run_ids) -> pd.DataFrame:
    """Long form: run_id, metric, subject, value, unit, direction, n, spread, source for the runs."""
    if not len(run_ids):
        return pd.DataFrame(columns=METRIC_COLUMNS)
    ids = list(map(str, run_ids))
    if not has_relation(con, "run_metrics"):
        return df(con, _DERIVED, [ids])
    out = df(con, "SELECT run_id, metric, coalesce(subject, '') AS subject, value, unit, direction, n, spread, "
                  "source FROM run_metrics WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND value IS NOT NULL", [ids])
    # runs ingested before run_metrics existed (until `compilewatch reingest`) get the same figures here
    missing = sorted(set(ids) - set(out["run_id"]))
    if missing:
        out = pd.concat([out, df(con, _DERIVED, [missing])], ignore_index=True)
    if "cache_hit_rate" not in set(out["metric"]):
        hits = df(con, _DERIVED, [ids])
        out = pd.concat([out, hits[hits["metric"] == "cache_hit_rate"]], ignore_index=True)
    return out


# -- keys: what each run had, for the "new since the baseline" rules and their evidence ---------------
BREAK_KEY = ("coalesce(gb.break_key, concat_ws(' | ', gb.gb_type, gb.reason_norm, "
             "gb.user_file || ':' || gb.user_line))")


def break_keys(con, run_ids) -> pd.DataFrame:
    """Per run and break key: count, type, reason, explanation, hints and the user's file:line."""
    return df(con, f"""
        SELECT gb.run_id, {BREAK_KEY} AS key, count(*) AS count, any_value(gb.gb_type) AS gb_type,
               any_value(coalesce(gb.reason_norm, gb.reason)) AS reason, any_value(gb.reason) AS raw_reason,
               any_value(gb.hints) AS hints, any_value(gb.user_file) AS user_file,
               any_value(gb.user_line) AS user_line, any_value(gb.user_function) AS user_function
        FROM graph_breaks gb WHERE gb.run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", _ids_param(run_ids))


def recompile_keys(con, run_ids) -> pd.DataFrame:
    """Per run and recompiling function: recompiles, where, and the first failed guard with its category."""
    return df(con, """
        WITH rc AS (SELECT run_id, coalesce(function, '?') AS function, any_value(file) AS file,
                           any_value(line) AS line, count(*) AS count, arg_min(reason, line_no) AS reason
                    FROM recompiles WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL),
        gf AS (SELECT run_id, coalesce(function, '?') AS function, mode(category) AS category,
                      arg_min(raw, line_no) AS guard
               FROM guard_failures WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL)
        SELECT rc.run_id, rc.function AS key, rc.count, rc.file, rc.line, coalesce(gf.guard, rc.reason) AS guard,
               gf.category
        FROM rc LEFT JOIN gf USING (run_id, function)""", _ids_param(run_ids) * 2)


def guard_category_keys(con, run_ids) -> pd.DataFrame:
    """Per run and guard-failure category: count, an example function and failed guard."""
    return df(con, """
        SELECT run_id, coalesce(category, 'other') AS key, count(*) AS count,
               arg_min(coalesce(function, '?'), line_no) AS function, arg_min(raw, line_no) AS guard
        FROM guard_failures WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", _ids_param(run_ids))


def limit_keys(con, run_ids) -> pd.DataFrame:
    """Per run, function and limit: hits, where, and the reason torch gave."""
    return df(con, """
        SELECT run_id, coalesce(function, '?') || ' (' || coalesce(limit_name, 'limit') || ')' AS key,
               count(*) AS count, any_value(function) AS function, any_value(limit_name) AS limit_name,
               any_value(limit_value) AS limit_value, any_value(file) AS file, any_value(line) AS line,
               any_value(reason) AS reason
        FROM limit_hits WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", _ids_param(run_ids))
