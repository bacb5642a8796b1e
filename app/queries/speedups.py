"""Speedup trends: bench_results per model over time and across versions (torch, label, commit)."""
from __future__ import annotations

import pandas as pd

from compilewatch.app.filters import DIMENSIONS, Filters
from compilewatch.app.queries.common import df, geomean, per_hardware, runs_cte

# bench rows may name their own model (one CSV, many models); the run's model is the fallback.
_BENCH = """
    SELECT coalesce(b.model, fr.model) AS model, fr.hardware, fr.run_id, fr.run_time, fr.torch_version, fr.label,
           fr.git_commit, b.speedup, b.compilation_latency_s, b.compression_ratio, b.abs_latency_ms,
           b.eager_latency_ms, b.mode, b.task
    FROM bench_results b JOIN fr USING (run_id)
"""


def _bench_cte(f: Filters) -> tuple[str, list]:
    cte, params = runs_cte(f, use_models=False)
    where = ""
    if f.models:
        where = " WHERE list_contains(?::VARCHAR[], coalesce(b.model, fr.model))"
        params = params + [list(f.models)]
    # one series per model and hardware: the model's name carries the hardware when the rows span two
    return (f"{cte}, bench0 AS ({_BENCH}{where}), "
            f"bench AS (SELECT * REPLACE ({per_hardware('model', 'bench0')} AS model) FROM bench0)"), params


def _dim(f: Filters) -> str:
    return f.dimension if f.dimension in DIMENSIONS else "torch_version"


def trend(con, f: Filters) -> pd.DataFrame:
    """Per model and period: geomean speedup, mean compile latency, geomean peak-memory ratio, runs,
    and the versions seen. The period is a day, or an hour / a minute when the selected bench rows
    span less than a month / three days (a fresh store often holds one afternoon), or a week past a
    quarter: a year of daily points per model is more than a chart shows and more than a page should
    send (the view draws this frame three times). At most 5,000 points."""
    cte, params = _bench_cte(f)
    sql = f"""
    WITH {cte},
    span AS (SELECT max(run_time) - min(run_time) AS s FROM bench)
    SELECT model,
           CASE WHEN (SELECT s FROM span) < INTERVAL 3 DAY THEN date_trunc('minute', run_time)
                WHEN (SELECT s FROM span) < INTERVAL 30 DAY THEN date_trunc('hour', run_time)
                WHEN (SELECT s FROM span) < INTERVAL 92 DAY THEN date_trunc('day', run_time)
                ELSE date_trunc('week', run_time) END AS period,
           {geomean('speedup')} AS speedup,
           avg(compilation_latency_s) AS compile_s,
           {geomean('compression_ratio')} AS memory_ratio,
           count(DISTINCT run_id) AS runs,
           string_agg(DISTINCT torch_version, ', ' ORDER BY torch_version) AS torch_versions,
           string_agg(DISTINCT label, ', ' ORDER BY label) AS labels
    FROM bench GROUP BY ALL ORDER BY period, model LIMIT 5000
    """
    return df(con, sql, params)


def by_version(con, f: Filters) -> pd.DataFrame:
    """Per value of f.dimension (torch_version, label or git_commit), oldest first: geomean over
    models of each model's geomean speedup, mean compile time, geomean memory ratio, models, runs."""
    cte, params = _bench_cte(f)
    dim = _dim(f)
    sql = f"""
    WITH {cte},
    pm AS (SELECT {dim} AS version, hardware, model, {geomean('speedup')} AS speedup,
                  avg(compilation_latency_s) AS compile_s, {geomean('compression_ratio')} AS memory_ratio,
                  count(DISTINCT run_id) AS runs, min(run_time) AS first_run, max(run_time) AS last_run
           FROM bench WHERE {dim} IS NOT NULL GROUP BY ALL)
    -- one bar per version and hardware: a geomean over two kinds of hardware compares nothing
    SELECT {per_hardware('version', 'pm')} AS version, {geomean('speedup')} AS geomean_speedup,
           avg(compile_s) AS compile_s, {geomean('memory_ratio')} AS memory_ratio, count(*) AS models,
           sum(runs) AS runs, min(first_run) AS first_run, max(last_run) AS last_run
    FROM pm GROUP BY version, hardware ORDER BY first_run LIMIT 200
    """
    return df(con, sql, params)


def versions(con, f: Filters) -> pd.DataFrame:
    """Values of f.dimension among the filtered runs (with or without bench rows), newest first."""
    cte, params = runs_cte(f)
    dim = _dim(f)
    return df(con, f"WITH {cte} SELECT {dim} AS version, count(*) AS runs, max(run_time) AS last_run "
                   f"FROM fr WHERE {dim} IS NOT NULL GROUP BY 1 ORDER BY last_run DESC LIMIT 200", params)


def version_table(con, f: Filters) -> pd.DataFrame:
    """Per model (and hardware, named when the rows span two), version A (f.version_a) against B
    (f.version_b) of f.dimension: speedup, compile time and memory ratio on each side and the change
    in percent; a final "geomean" row per hardware."""
    cols = ["model", "speedup_a", "speedup_b", "speedup_change_pct", "compile_s_a", "compile_s_b",
            "compile_change_pct", "memory_ratio_a", "memory_ratio_b", "memory_change_pct"]
    if not (f.version_a and f.version_b):
        return pd.DataFrame(columns=cols)
    cte, params = _bench_cte(f)
    dim = _dim(f)
    a, b = f"{dim} = sel.va", f"{dim} = sel.vb"
    sql = f"""
    WITH {cte},
    sel AS (SELECT ?::VARCHAR AS va, ?::VARCHAR AS vb),
    pm AS (SELECT model, hardware,
                  {geomean(f'CASE WHEN {a} THEN speedup END')} AS speedup_a,
                  {geomean(f'CASE WHEN {b} THEN speedup END')} AS speedup_b,
                  avg(compilation_latency_s) FILTER (WHERE {a}) AS compile_s_a,
                  avg(compilation_latency_s) FILTER (WHERE {b}) AS compile_s_b,
                  {geomean(f'CASE WHEN {a} THEN compression_ratio END')} AS memory_ratio_a,
                  {geomean(f'CASE WHEN {b} THEN compression_ratio END')} AS memory_ratio_b
           FROM bench CROSS JOIN sel WHERE {dim} IN (sel.va, sel.vb) GROUP BY model, hardware),
    -- the geomean row is per hardware too (one row when the selection ran on one kind)
    allm AS (SELECT {per_hardware("'geomean (all models)'", 'pm')} AS model, hardware,
                    {geomean('speedup_a')} AS speedup_a,
                    {geomean('speedup_b')} AS speedup_b, avg(compile_s_a) AS compile_s_a,
                    avg(compile_s_b) AS compile_s_b, {geomean('memory_ratio_a')} AS memory_ratio_a,
                    {geomean('memory_ratio_b')} AS memory_ratio_b
             FROM pm WHERE speedup_a IS NOT NULL AND speedup_b IS NOT NULL GROUP BY hardware),
    u AS (SELECT *, 0 AS o FROM pm UNION ALL BY NAME SELECT *, 1 AS o FROM allm)
    SELECT model, speedup_a, speedup_b, 100 * (speedup_b / speedup_a - 1) AS speedup_change_pct,
           compile_s_a, compile_s_b, 100 * (compile_s_b / compile_s_a - 1) AS compile_change_pct,
           memory_ratio_a, memory_ratio_b, 100 * (memory_ratio_b / memory_ratio_a - 1) AS memory_change_pct
    FROM u ORDER BY o, model LIMIT 1000
    """
    return df(con, sql, params + [f.version_a, f.version_b])
