"""Speedup trends: bench_results per model over time and across versions (torch, label, commit).

Over a long window the figures come from the bench weeks (store/bench_weeks.py: the bench rows
summed per week x model x hardware x torch version), the days of the partial weeks at the window's
edges from their bench rows: every figure decomposes over cells exactly (geomeans as sums of logs
and counts, means as sums and counts, distinct runs, as a run's rows of one model lie in one cell,
first and last runs, the versions and labels seen), up to the order in which the floating-point sums
are added. A label filter, and versions that are labels or commits, read the bench rows; so does a
shorter window, whose rows are few enough as they are, and a trend whose rows span less than a
quarter, whose points are days or finer. _reads_weeks decides."""
from __future__ import annotations

from datetime import datetime, time, timedelta

import pandas as pd

from compilewatch.app.cells import whole_weeks
from compilewatch.app.filters import DIMENSIONS, Filters, key_clauses
from compilewatch.app.queries.common import df, geomean, geomean_sums, mean_sums, per_hardware, runs_cte
from compilewatch.store.bench_weeks import CELL, COLUMNS, cell_rows

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


# The trend's point by the span of the selected bench rows: a minute, an hour or a day while it is
# shorter than the days given, else a week.
PERIODS = ((3, "minute"), (30, "hour"), (92, "day"))
WEEKLY_DAYS = PERIODS[-1][0]
# From this window on the versions read the bench weeks: at 100,000 runs a year they cost half of
# what the bench rows cost over 60 days and more, about as much over 30 (benchmarks/bench_trends.py).
VERSIONS_WEEKS_DAYS = 56


def _reads_weeks(f: Filters, versions: bool) -> bool:
    """Whether the bench weeks serve f, else the bench rows (the one place that chooses): every
    filter they take is part of a week cell (a label is not), the versions compared (``versions``:
    by_version, version_table) are torch versions, and the window is long: for the versions
    VERSIONS_WEEKS_DAYS or more, for the trend longer than WEEKLY_DAYS, as a shorter window's rows
    span less and its points are days or finer."""
    if f.labels or (versions and _dim(f) != "torch_version"):
        return False
    if not (f.start and f.end):
        return True
    return f.window_days() >= VERSIONS_WEEKS_DAYS if versions else f.window_days() > WEEKLY_DAYS


def _week_cells(f: Filters) -> tuple[str, list]:
    """(SQL of a relation, params): the week cells (store/bench_weeks.py: CELL and COLUMNS) of the
    bench rows _bench_cte picks. The window's whole weeks come from rollup_week_bench; the days of
    its partial weeks are summed from their bench rows into cells of the same shape."""
    keys, key_params = key_clauses(f, lambda col: f"b.{col}")    # labels: never read from here
    weeks = whole_weeks(f)
    parts, params, edges = [], [], []
    if weeks is None:
        edges.append((f.start, f.end + timedelta(days=1)))
    else:
        first, after = weeks
        in_weeks = [*keys, *(["b.week >= ?"] if first else []), *(["b.week < ?"] if after else [])]
        parts.append(f"SELECT {', '.join((*CELL, *COLUMNS))} FROM rollup_week_bench b "
                     f"WHERE {' AND '.join(in_weeks) or 'TRUE'}")
        params += key_params + [d for d in (first, after) if d]
        if f.start and first > f.start:
            edges.append((f.start, first))
        if f.end and after <= f.end:
            edges.append((after, f.end + timedelta(days=1)))
    if edges:
        # the runs of the edge days, then their bench rows of the models asked for
        run_keys, run_params = key_clauses(f, lambda col: f"r.{col}", skip=("models",))
        days = " OR ".join("r.run_time >= ? AND r.run_time < ?" for _ in edges)
        models, model_params = key_clauses(f, lambda col: f"b.{col}", skip=("torch_versions", "labels", "hardware"))
        parts.append(cell_rows(" AND ".join([*run_keys, f"({days})"]), " AND ".join(models) or "TRUE"))
        params += run_params + [datetime.combine(d, time.min) for edge in edges for d in edge] + model_params
    return "(" + " UNION ALL ".join(parts) + ")", params


def trend(con, f: Filters) -> pd.DataFrame:
    """Per model and period: geomean speedup, mean compile latency, geomean peak-memory ratio, runs,
    and the versions seen. The period is a day, or an hour / a minute when the selected bench rows
    span less than a month / three days (a fresh store often holds one afternoon), or a week past a
    quarter: a year of daily points per model is more than a chart shows and more than a page should
    send (the view draws this frame three times). At most 5,000 points."""
    if _reads_weeks(f, versions=False):
        d = _trend_weeks(con, f)
        if d.empty or d["weekly"].iloc[0]:    # the same on every row
            return d.drop(columns="weekly")
        # the selected rows span less than a quarter: points finer than the weeks, from the rows
    return _trend_rows(con, f)


# The labels a trend point names in its tooltip. A team's PR labels are one per pull request, so a
# week of a busy repository holds hundreds; listed whole they were most of what the page sent over a
# year at 300,000 runs (1.3 MiB). The first few and how many more say what the point holds.
LABELS_SHOWN = 8


def _shown(labels: str) -> str:
    """SQL: the sorted distinct labels of the list ``labels``, the first LABELS_SHOWN and how many
    more; NULL for none."""
    return (f"CASE WHEN len({labels}) > {LABELS_SHOWN} THEN array_to_string({labels}[1:{LABELS_SHOWN}], ', ') "
            f"|| ', … (+' || (len({labels}) - {LABELS_SHOWN}) || ' more)' "
            f"WHEN len({labels}) > 0 THEN array_to_string({labels}, ', ') END")


def _trend_rows(con, f: Filters) -> pd.DataFrame:
    cte, params = _bench_cte(f)
    period = "\n                ".join(f"WHEN (SELECT s FROM span) < INTERVAL {days} DAY THEN date_trunc('{unit}', run_time)"
                                      for days, unit in PERIODS)
    sql = f"""
    WITH {cte},
    span AS (SELECT max(run_time) - min(run_time) AS s FROM bench)
    SELECT model,
           CASE {period}
                ELSE date_trunc('week', run_time) END AS period,
           {geomean('speedup')} AS speedup,
           avg(compilation_latency_s) AS compile_s,
           {geomean('compression_ratio')} AS memory_ratio,
           count(DISTINCT run_id) AS runs,
           string_agg(DISTINCT torch_version, ', ' ORDER BY torch_version) AS torch_versions,
           {_shown("list_sort(list_distinct(list(label)))")} AS labels
    FROM bench GROUP BY ALL ORDER BY period, model LIMIT 5000
    """
    return df(con, sql, params)


def _named_cells(f: Filters) -> tuple[str, list]:
    """``cells AS (...), named AS (...)``: the week cells of f, and the same with the model named by
    its hardware where the cells span several kinds (as _bench_cte names the bench rows' models)."""
    cells, params = _week_cells(f)
    return (f"cells AS MATERIALIZED {cells}, "
            f"named AS (SELECT * REPLACE ({per_hardware('model', 'cells')} AS model) FROM cells)"), params


def _trend_weeks(con, f: Filters) -> pd.DataFrame:
    """trend's frame from the week cells, and ``weekly``: whether the selected rows span a quarter
    or more, so that a week is the trend's period. The cells are grouped by model and hardware
    (the hardware only where per_hardware names it) and named after: grouping by the named text
    cost four times as much. The versions and labels are distinct lists, not string_agg(DISTINCT
    ...), which cost as much again."""
    cells, params = _week_cells(f)
    several = "(SELECT count(DISTINCT hardware) FROM cells) > 1"
    sql = f"""
    WITH cells AS MATERIALIZED {cells},
    span AS (SELECT max(last_run) - min(first_run) >= INTERVAL {WEEKLY_DAYS} DAY AS weekly FROM cells),
    g AS (SELECT model, CASE WHEN model IS NOT NULL AND {several} THEN hardware END AS hardware, week,
                 {geomean_sums('speedup_ln', 'speedups')} AS speedup,
                 {mean_sums('compile_s', 'compiles')} AS compile_s,
                 {geomean_sums('memory_ln', 'memories')} AS memory_ratio,
                 sum(runs)::BIGINT AS runs,
                 CASE WHEN count(torch_version) > 0 THEN list_sort(list_distinct(list(torch_version))) END AS versions,
                 CASE WHEN sum(len(labels)) > 0 THEN list_sort(list_distinct(flatten(list(labels)))) END AS labels
          FROM cells GROUP BY ALL)
    SELECT * FROM (
        SELECT {per_hardware('model', 'cells')} AS model, week::TIMESTAMP AS period, speedup, compile_s, memory_ratio,
               runs, array_to_string(versions, ', ') AS torch_versions, {_shown('labels')} AS labels,
               (SELECT weekly FROM span) AS weekly
        FROM g)
    ORDER BY period, model LIMIT 5000
    """
    return df(con, sql, params)


# by_version's bars over pm (version, hardware, model and the model's figures), from either source.
# One bar per version and hardware: a geomean over two kinds of hardware compares nothing.
_BY_VERSION = f"""
    SELECT {per_hardware('version', 'pm')} AS version, {geomean('speedup')} AS geomean_speedup,
           avg(compile_s) AS compile_s, {geomean('memory_ratio')} AS memory_ratio, count(*) AS models,
           sum(runs) AS runs, min(first_run) AS first_run, max(last_run) AS last_run
    FROM pm GROUP BY version, hardware ORDER BY first_run LIMIT 200"""


def by_version(con, f: Filters) -> pd.DataFrame:
    """Per value of f.dimension (torch_version, label or git_commit), oldest first: geomean over
    models of each model's geomean speedup, mean compile time, geomean memory ratio, models, runs."""
    if _reads_weeks(f, versions=True):
        cells, params = _named_cells(f)
        pm = f"""pm AS (SELECT torch_version AS version, hardware, model,
                  {geomean_sums('speedup_ln', 'speedups')} AS speedup, {mean_sums('compile_s', 'compiles')} AS compile_s,
                  {geomean_sums('memory_ln', 'memories')} AS memory_ratio, sum(runs)::BIGINT AS runs,
                  min(first_run) AS first_run, max(last_run) AS last_run
           FROM named WHERE torch_version IS NOT NULL GROUP BY ALL)"""
    else:
        cells, params = _bench_cte(f)
        dim = _dim(f)
        pm = f"""pm AS (SELECT {dim} AS version, hardware, model, {geomean('speedup')} AS speedup,
                  avg(compilation_latency_s) AS compile_s, {geomean('compression_ratio')} AS memory_ratio,
                  count(DISTINCT run_id) AS runs, min(run_time) AS first_run, max(run_time) AS last_run
           FROM bench WHERE {dim} IS NOT NULL GROUP BY ALL)"""
    return df(con, f"WITH {cells},\n    {pm}{_BY_VERSION}", params)


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
    if _reads_weeks(f, versions=True):
        cells, params = _named_cells(f)
        sides = {side: f"torch_version = sel.v{side}" for side in "ab"}
        pm = f"""pm AS (SELECT model, hardware, {", ".join(
                      f"{geomean_sums('speedup_ln', 'speedups', w)} AS speedup_{s}, "
                      f"{mean_sums('compile_s', 'compiles', w)} AS compile_s_{s}, "
                      f"{geomean_sums('memory_ln', 'memories', w)} AS memory_ratio_{s}" for s, w in sides.items())}
           FROM named CROSS JOIN sel WHERE torch_version IN (sel.va, sel.vb) GROUP BY model, hardware)"""
    else:
        cells, params = _bench_cte(f)
        dim = _dim(f)
        a, b = f"{dim} = sel.va", f"{dim} = sel.vb"
        pm = f"""pm AS (SELECT model, hardware,
                  {geomean(f'CASE WHEN {a} THEN speedup END')} AS speedup_a,
                  {geomean(f'CASE WHEN {b} THEN speedup END')} AS speedup_b,
                  avg(compilation_latency_s) FILTER (WHERE {a}) AS compile_s_a,
                  avg(compilation_latency_s) FILTER (WHERE {b}) AS compile_s_b,
                  {geomean(f'CASE WHEN {a} THEN compression_ratio END')} AS memory_ratio_a,
                  {geomean(f'CASE WHEN {b} THEN compression_ratio END')} AS memory_ratio_b
           FROM bench CROSS JOIN sel WHERE {dim} IN (sel.va, sel.vb) GROUP BY model, hardware)"""
    sql = f"""
    WITH {cells},
    sel AS (SELECT ?::VARCHAR AS va, ?::VARCHAR AS vb),
    {pm},
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
