"""Compare two runs (f.run_id vs f.run_b) or two versions (f.version_a vs f.version_b of f.dimension).

Side A is the baseline, B the candidate: "new" breaks appear in B only, "fixed" in A only. Counts
come from the per-run rollups (store/rollups.py): a side of a version may hold thousands of runs.
Two torch versions over a long window read cells instead (store/compare_cells.py: whole weeks from
the week cells, the edge days from the day cells; and the bench weeks of store/bench_weeks.py, whose
edge days are summed from their bench rows). Either way the same SQL adds the groups up; reads_cells
decides.
"""
from __future__ import annotations

from datetime import date, datetime, time, timedelta

import pandas as pd

from compilewatch.app.cells import whole_weeks
from compilewatch.app.filters import DIMENSIONS, Filters, key_clauses
from compilewatch.app.queries.common import HARDWARE, df, geomean_sums, mean_sums, runs_cte
from compilewatch.store import compare_cells
from compilewatch.store.bench_weeks import FIGURES as BENCH_FIGURES
from compilewatch.store.bench_weeks import SUMS as BENCH_SUMS
from compilewatch.store.bench_weeks import cell_rows as bench_cell_rows


def mode(f: Filters) -> str:
    return "runs" if (f.run_id and f.run_b) else "versions"


def _dim(f: Filters) -> str:
    return f.dimension if f.dimension in DIMENSIONS else "torch_version"


def _sides(f: Filters) -> tuple[str, list]:
    """``sides AS (run_id, side)`` for the two sides; per-run counts are divided by runs per side."""
    if mode(f) == "runs":
        return (f"sides AS (SELECT run_id, CASE WHEN run_id = ? THEN 'A' ELSE 'B' END AS side, {HARDWARE} AS hardware "
                "FROM runs r WHERE run_id IN (?, ?))"), [f.run_id, f.run_id, f.run_b]
    dim = _dim(f)
    cte, params = runs_cte(f, use_versions=dim != "torch_version")
    return (f"{cte}, sides AS (SELECT run_id, CASE WHEN {dim} = ? THEN 'A' ELSE 'B' END AS side, hardware "
            f"FROM fr WHERE {dim} IN (?, ?))"), params + [f.version_a, f.version_a, f.version_b]


def _ready(f: Filters) -> bool:
    return bool((f.run_id and f.run_b) or (f.version_a and f.version_b))


def reads_cells(f: Filters) -> bool:
    """Whether the cells serve f, else the runs' rollups (the one place that chooses): two torch
    versions (labels and commits are not part of a cell) and no label filter. Every figure is the
    same either way; a window of any length reads fewer cell rows than it would scan of the runs'
    rollups, which a side's runs cannot narrow (a run's rows lie wherever its ingest put them)."""
    return mode(f) == "versions" and _dim(f) == "torch_version" and not f.labels


_SIDE = "CASE WHEN {0}.torch_version = ? THEN 'A' ELSE 'B' END"
_GROUP = ("side", "model", "hardware")


def _weeks(f: Filters) -> tuple[tuple[date | None, date | None] | None, list[tuple[date, date]]]:
    """The window's whole weeks ([first, after), None when it holds none) and [start, after) of its
    days outside them."""
    weeks = whole_weeks(f)
    if weeks is None:
        return None, [(f.start, f.end + timedelta(days=1))]
    first, after = weeks
    edges = []
    if f.start and first > f.start:
        edges.append((f.start, first))
    if f.end and after <= f.end:
        edges.append((after, f.end + timedelta(days=1)))
    return weeks, edges


def _cell_where(f: Filters, use_models: bool = True) -> tuple[list[str], list]:
    """WHERE clauses over cells (alias c) of the two versions, with the filters a cell takes."""
    keys, params = key_clauses(f, lambda col: f"c.{col}", skip=("torch_versions", "labels")
                               + (() if use_models else ("models",)))
    return [*keys, "c.torch_version IN (?, ?)"], params + [f.version_a, f.version_b]


def _in_weeks(weeks: tuple[date | None, date | None]) -> tuple[list[str], list]:
    first, after = weeks
    return ([*(["c.week >= ?"] if first else []), *(["c.week < ?"] if after else [])],
            [d for d in (first, after) if d])


def _cells(kind: str, f: Filters) -> tuple[str, list]:
    """(SQL, params): ``kind``'s cells (store/compare_cells.py) of the two versions' window, each
    with its side: the whole weeks from the week cells, the other days from the day cells."""
    weeks, edges = _weeks(f)
    parts, params = [], []
    if weeks:
        where, week_params = _cell_where(f)
        in_weeks, in_params = _in_weeks(weeks)
        parts.append(f"SELECT {_SIDE.format('c')} AS side, c.* EXCLUDE (week) FROM "
                     f"{compare_cells.table('week', kind)} c WHERE {' AND '.join(where + in_weeks)}")
        params += [f.version_a] + week_params + in_params
    if edges:
        where, edge_params = _cell_where(f)
        days = " OR ".join("c.day >= ? AND c.day < ?" for _ in edges)
        parts.append(f"SELECT {_SIDE.format('c')} AS side, c.* EXCLUDE (day) FROM {compare_cells.table('day', kind)} c "
                     f"WHERE {' AND '.join(where)} AND ({days})")
        params += [f.version_a] + edge_params + [d for edge in edges for d in edge]
    return " UNION ALL ".join(f"({p})" for p in parts), params


def _bench_weeks(f: Filters) -> tuple[str, list]:
    """(SQL, params): the bench weeks (store/bench_weeks.py) of the two versions' whole weeks in the
    window, and the other days' bench rows summed into cells of the same shape, each with its side."""
    weeks, edges = _weeks(f)
    parts, params = [], []
    if weeks:
        where, week_params = _cell_where(f, use_models=False)
        in_weeks, in_params = _in_weeks(weeks)
        parts.append(f"SELECT * FROM rollup_week_bench c WHERE {' AND '.join(where + in_weeks)}")
        params += week_params + in_params
    if edges:
        keys, edge_params = key_clauses(f, lambda col: f"r.{col}", skip=("torch_versions", "labels", "models"))
        days = [(datetime.combine(a, time.min), datetime.combine(b, time.min)) for a, b in edges]
        parts.append(bench_cell_rows(" AND ".join([*keys, "r.torch_version IN (?, ?)", "(" + " OR ".join(
            "r.run_time >= ? AND r.run_time < ?" for _ in days) + ")"])))
        params += edge_params + [f.version_a, f.version_b] + [d for edge in days for d in edge]
    rows = " UNION ALL BY NAME ".join(f"({p})" for p in parts)
    return f"SELECT {_SIDE.format('c')} AS side, c.* FROM ({rows}) c", [f.version_a] + params


def _with(f: Filters, *kinds: str) -> tuple[str, list]:
    """``WITH`` the groups of each of ``kinds`` (store/compare_cells.py: totals, breaks, functions,
    steps) for f's two sides, each named after its kind: columns side, model, hardware, the kind's
    keys and its sums. From the cells where reads_cells(f), else summed from the rollups of the
    sides' runs; the same columns, added up the same way, either way."""
    ctes, params = [], []
    if reads_cells(f):
        for kind in kinds:
            rows, p = _cells(kind, f)
            ctes.append(f"{kind} AS ({compare_cells.merged(kind, f'({rows})', _GROUP)})")
            params += p
        return "WITH " + ", ".join(ctes), params
    cte, params = _sides(f)
    ctes = [cte, "side_runs AS (SELECT s.run_id, s.side, r.model, s.hardware FROM sides s JOIN runs r USING (run_id))"]
    ctes += [f"{kind} AS ({compare_cells.sums(kind, 'side_runs', _GROUP)})" for kind in kinds]
    return "WITH " + ", ".join(ctes), params


def _bench(f: Filters, sides_given: bool = False) -> tuple[str, list]:
    """(SQL, params) of ``bench``: the sides' bench rows summed per side, model and hardware as the
    bench weeks sum them (store/bench_weeks.py), so both ways share one SQL of figures. From the
    bench weeks where reads_cells(f) and no model filter (a bench week's model is the bench row's,
    the filter's the run's), else from the sides' bench rows, after the ``sides`` CTE unless
    ``sides_given`` (the query already holds it)."""
    if reads_cells(f) and not f.models:
        rows, params = _bench_weeks(f)
        merge = ", ".join(f"sum({name}) AS {name}" for name in BENCH_FIGURES)
        return f"bench AS (SELECT side, model, hardware, {merge} FROM ({rows}) GROUP BY ALL)", params
    sums = ", ".join(f"{sql} AS {name}" for name, sql in BENCH_SUMS if name in BENCH_FIGURES)
    cte, params = ("", []) if sides_given else _sides(f)
    return (f"{cte}{'' if sides_given else ', '}bench AS (SELECT s.side, coalesce(b.model, r.model) AS model, s.hardware, {sums} "
            "FROM bench_results b JOIN sides s USING (run_id) JOIN runs r USING (run_id) GROUP BY ALL)"), params


def summary(con, f: Filters) -> pd.DataFrame:
    """One row per side: runs, graph breaks, distinct breaks, recompiles, limit hits, geomean
    speedup (over the side's bench rows), compile time per run."""
    if not _ready(f):
        return pd.DataFrame(columns=["side", "runs", "graph_breaks", "distinct_breaks", "recompiles",
                                     "limit_hits", "geomean_speedup", "compile_s_per_run"])
    with_, params = _with(f, "totals", "breaks")
    bench, bench_params = _bench(f, sides_given=not reads_cells(f))
    sql = f"""
    {with_}, {bench},
    t AS (SELECT side, sum(runs) AS runs, sum(graph_breaks)::BIGINT AS graph_breaks,
                 sum(recompiles)::BIGINT AS recompiles, sum(limit_hits)::BIGINT AS limit_hits,
                 sum(compile_s) AS compile_s
          FROM totals GROUP BY side),
    gb AS (SELECT side, count(DISTINCT break_key) AS distinct_breaks FROM breaks GROUP BY side),
    sp AS (SELECT side, {geomean_sums('speedup_ln', 'speedups')} AS geomean_speedup FROM bench GROUP BY side)
    SELECT t.side, t.runs::BIGINT AS runs, coalesce(t.graph_breaks, 0) AS graph_breaks,
           coalesce(gb.distinct_breaks, 0) AS distinct_breaks, coalesce(t.recompiles, 0) AS recompiles,
           coalesce(t.limit_hits, 0) AS limit_hits, sp.geomean_speedup, t.compile_s / t.runs AS compile_s_per_run
    FROM t LEFT JOIN gb USING (side) LEFT JOIN sp USING (side)
    ORDER BY side
    """
    return df(con, sql, params + bench_params)


# runs per side, 1 for a side with none (its counts are all 0)
_PER_SIDE = ("na AS (SELECT coalesce(sum(runs) FILTER (WHERE side = 'A'), 1) AS ra, "
             "coalesce(sum(runs) FILTER (WHERE side = 'B'), 1) AS rb FROM totals)")


def break_diff(con, f: Filters) -> pd.DataFrame:
    """Per break_key: occurrences per run on each side and status new|fixed|more|fewer|same.
    New and fixed first, then by size of change; f.limit * 4 rows at most."""
    cols = ["status", "break_key", "gb_type", "reason", "location", "per_run_a", "per_run_b", "runs_a", "runs_b"]
    if not _ready(f):
        return pd.DataFrame(columns=cols)
    with_, params = _with(f, "totals", "breaks")
    sql = f"""
    {with_}, {_PER_SIDE},
    k AS (SELECT break_key, any_value(gb_type) AS gb_type, any_value(reason) AS reason, any_value(location) AS location,
                 coalesce(sum(n) FILTER (WHERE side = 'A'), 0)::BIGINT AS occ_a,
                 coalesce(sum(n) FILTER (WHERE side = 'B'), 0)::BIGINT AS occ_b,
                 coalesce(sum(runs) FILTER (WHERE side = 'A'), 0)::BIGINT AS runs_a,
                 coalesce(sum(runs) FILTER (WHERE side = 'B'), 0)::BIGINT AS runs_b
          FROM breaks GROUP BY break_key),
    p AS (SELECT k.*, occ_a / ra AS per_run_a, occ_b / rb AS per_run_b FROM k, na)
    SELECT CASE WHEN occ_a = 0 THEN 'new' WHEN occ_b = 0 THEN 'fixed'
                WHEN per_run_b > per_run_a THEN 'more' WHEN per_run_b < per_run_a THEN 'fewer' ELSE 'same' END AS status,
           break_key, gb_type, reason, location, per_run_a, per_run_b, runs_a, runs_b
    FROM p
    ORDER BY CASE WHEN occ_a = 0 THEN 0 WHEN occ_b = 0 THEN 1 ELSE 2 END, abs(per_run_b - per_run_a) DESC, break_key
    LIMIT ?
    """
    return df(con, sql, params + [int(f.limit) * 4])


def recompile_diff(con, f: Filters) -> pd.DataFrame:
    """Per function: recompiles and limit hits per run on each side, the change, and B's top guard
    category (the most frequent; the first by name among equals)."""
    cols = ["function", "recompiles_a", "recompiles_b", "delta", "limit_hits_a", "limit_hits_b", "top_category_b"]
    if not _ready(f):
        return pd.DataFrame(columns=cols)
    with_, params = _with(f, "totals", "functions")
    sql = f"""
    {with_}, {_PER_SIDE},
    rc AS (SELECT function, (sum(n) FILTER (WHERE side = 'A'))::BIGINT AS a, (sum(n) FILTER (WHERE side = 'B'))::BIGINT AS b
           FROM functions WHERE kind = 'recompiles' GROUP BY 1),
    lh AS (SELECT function, (sum(n) FILTER (WHERE side = 'A'))::BIGINT AS la, (sum(n) FILTER (WHERE side = 'B'))::BIGINT AS lb
           FROM functions WHERE kind = 'limit_hits' GROUP BY 1),
    gf AS (SELECT function, first(category ORDER BY n DESC, category) AS top_category_b
           FROM (SELECT function, category, sum(n) AS n FROM functions
                 WHERE kind = 'guard_failures' AND side = 'B' GROUP BY ALL)
           GROUP BY 1)
    SELECT function, coalesce(a, 0) / ra AS recompiles_a, coalesce(b, 0) / rb AS recompiles_b,
           coalesce(b, 0) / rb - coalesce(a, 0) / ra AS delta,
           coalesce(la, 0) / ra AS limit_hits_a, coalesce(lb, 0) / rb AS limit_hits_b, top_category_b
    FROM rc FULL JOIN lh USING (function) LEFT JOIN gf USING (function), na
    ORDER BY abs(delta) DESC, function LIMIT ?
    """
    return df(con, sql, params + [int(f.limit)])


def speedup_diff(con, f: Filters) -> pd.DataFrame:
    """Per model and hardware (a speedup is only comparable on the same hardware): geomean speedup,
    compile latency and memory ratio on each side and the change in %."""
    cols = ["model", "hardware", "speedup_a", "speedup_b", "speedup_change_pct", "compile_s_a", "compile_s_b",
            "memory_ratio_a", "memory_ratio_b"]
    if not _ready(f):
        return pd.DataFrame(columns=cols)
    bench, params = _bench(f)

    def on(side: str) -> str:
        return f"side = '{side}'"
    sql = f"""
    WITH {bench},
    m AS (SELECT model, hardware,
                 {geomean_sums('speedup_ln', 'speedups', on('A'))} AS speedup_a,
                 {geomean_sums('speedup_ln', 'speedups', on('B'))} AS speedup_b,
                 {mean_sums('compile_s', 'compiles', on('A'))} AS compile_s_a,
                 {mean_sums('compile_s', 'compiles', on('B'))} AS compile_s_b,
                 {geomean_sums('memory_ln', 'memories', on('A'))} AS memory_ratio_a,
                 {geomean_sums('memory_ln', 'memories', on('B'))} AS memory_ratio_b
          FROM bench GROUP BY model, hardware)
    SELECT model, hardware, speedup_a, speedup_b, 100 * (speedup_b / speedup_a - 1) AS speedup_change_pct,
           compile_s_a, compile_s_b, memory_ratio_a, memory_ratio_b
    FROM m ORDER BY abs(speedup_change_pct) DESC NULLS LAST, model, hardware LIMIT 500
    """
    return df(con, sql, params)


def hardware(con, f: Filters) -> pd.DataFrame:
    """Per side and hardware: runs. Two sides on different hardware are not compared on figures that
    depend on it (speedup, compile time, step and iteration time)."""
    if not _ready(f):
        return pd.DataFrame(columns=["side", "hardware", "runs"])
    cte, params = _sides(f)
    return df(con, f"WITH {cte} SELECT side, hardware, count(*) AS runs FROM sides GROUP BY ALL ORDER BY side, hardware",
              params)


def runtime(con, f: Filters) -> pd.DataFrame:
    """Step and iteration times from the timing hooks (run_metrics), per model, hardware, metric and
    callable: on each side the median over runs of each run's median, the runs' range, the steps'
    typical IQR and the run count, and the change in % where both sides ran on that hardware."""
    cols = ["model", "hardware", "metric", "subject", "median_a", "low_a", "high_a", "step_iqr_a", "runs_a",
            "median_b", "low_b", "high_b", "step_iqr_b", "runs_b", "change_pct"]
    if not _ready(f):
        return pd.DataFrame(columns=cols)
    with_, params = _with(f, "steps")

    def on(side: str) -> str:
        return f"FILTER (WHERE side = '{side}')"
    # one row a side, model, hardware, metric and callable either way (_with adds the cells up):
    # its medians are taken over the values it holds
    g = f"""
    g AS (SELECT model, hardware, metric, subject,
                 list_median(flatten(list(vals) {on('A')})) AS median_a, min(low) {on('A')} AS low_a,
                 max(high) {on('A')} AS high_a, list_median(flatten(list(spreads) {on('A')})) AS step_iqr_a,
                 coalesce(sum(runs) {on('A')}, 0)::BIGINT AS runs_a,
                 list_median(flatten(list(vals) {on('B')})) AS median_b, min(low) {on('B')} AS low_b,
                 max(high) {on('B')} AS high_b, list_median(flatten(list(spreads) {on('B')})) AS step_iqr_b,
                 coalesce(sum(runs) {on('B')}, 0)::BIGINT AS runs_b
          FROM steps GROUP BY ALL)"""
    sql = f"""
    {with_}, {g}
    SELECT model, hardware, metric, subject, median_a, median_b, 100 * (median_b / median_a - 1) AS change_pct,
           low_a, high_a, low_b, high_b, step_iqr_a, step_iqr_b, runs_a, runs_b FROM g
    ORDER BY metric = 'step_time', model, hardware, subject LIMIT 500
    """
    return df(con, sql, params)


def compile_diff(con, f: Filters) -> pd.DataFrame:
    """Two runs' subgraphs matched by name and compile ids matched by frame (deepdive/diff.py), one
    row each: what the compiler did differently (a subgraph's artifacts; a compile id's ops, guards,
    kernels, compile time), and those on one side only. Reads the
    matched compile ids' graphs, guards and output code: shown when a reader opens it."""
    from compilewatch.deepdive.diff import diff_runs
    if mode(f) != "runs":
        return pd.DataFrame()
    d = diff_runs(con, f.run_id, f.run_b)
    rows = []
    # subgraphs first, paired by name (deepdive/subgraphs.py): what differs is named, not diffed here
    for sd in d.subgraphs:
        rows.append({"compile_id_a": ", ".join(sd.baseline_ids) or None, "compile_id_b": ", ".join(sd.candidate_ids) or None,
                     "compiled_frame": f"subgraph {sd.label}", "what": "subgraph changed" if sd.changed else "same",
                     "artifacts": "; ".join([f"+ {k}" for k in sd.artifacts_added] + [f"− {k}" for k in sd.artifacts_removed]
                                                 + [f"≠ {k}" for k in sd.artifacts_changed])})
    for side, items in (("only in A", d.subgraphs_only_baseline), ("only in B", d.subgraphs_only_candidate)):
        for sg in items:
            ids = ", ".join(sg.compile_ids) or None
            rows.append({"compile_id_a": ids if side == "only in A" else None,
                         "compile_id_b": ids if side == "only in B" else None,
                         "compiled_frame": f"subgraph {sg.label}", "what": side})
    for p in d.pairs:
        t = p.phases.get("total", (None, None))
        rows.append({"compile_id_a": p.baseline_id, "compile_id_b": p.candidate_id,
                     "compiled_frame": f"{p.frame[0]} ({p.frame[1]}:{p.frame[2]})", "what": "changed" if p.changed else "same",
                     "ops": "; ".join([f"+ {k}" + (f" ×{n}" if n > 1 else "") for k, n in p.ops_added.items()]
                                      + [f"− {k}" + (f" ×{n}" if n > 1 else "") for k, n in p.ops_removed.items()]),
                     "guards": "; ".join([f"+ {g}" for g in p.guards_added] + [f"− {g}" for g in p.guards_removed]),
                     "kernels": "; ".join([f"+ {k}" for k in p.kernels_added] + [f"− {k}" for k in p.kernels_removed]),
                     "kernel_count": f"{p.kernel_count[0]} → {p.kernel_count[1]}",
                     "compile_s_a": t[0], "compile_s_b": t[1], "graphs_changed": ", ".join(p.graphs_changed)})
    for side, items in (("only in A", d.only_baseline), ("only in B", d.only_candidate)):
        for c in items:
            rows.append({"compile_id_a": c.compile_id if side == "only in A" else None,
                         "compile_id_b": c.compile_id if side == "only in B" else None,
                         "compiled_frame": f"{c.frame[0]} ({c.frame[1]}:{c.frame[2]})", "what": side,
                         "compile_s_a": c.phases.get("total") if side == "only in A" else None,
                         "compile_s_b": c.phases.get("total") if side == "only in B" else None})
    return pd.DataFrame(rows, columns=["compile_id_a", "compile_id_b", "compiled_frame", "what", "artifacts", "ops",
                                       "guards", "kernels", "kernel_count", "compile_s_a", "compile_s_b", "graphs_changed"])


def default_versions(con, f: Filters) -> pd.DataFrame:
    """The pair of f.dimension's values the page opens on: the newest two that ran the same model on
    the same hardware (a pair that ran on different hardware compares nothing), older as A. One row
    (version_a, version_b, model, hardware), none when no model ran two values on one hardware."""
    dim = f.dimension if f.dimension in DIMENSIONS else "torch_version"
    cte, params = runs_cte(f.replace(torch_versions=()) if dim == "torch_version" else f,
                           use_versions=dim != "torch_version")
    sql = f"""
    WITH {cte},
    v AS (SELECT model, hardware, {dim} AS version, max(run_time) AS last_run FROM fr
          WHERE {dim} IS NOT NULL AND model IS NOT NULL GROUP BY ALL),
    ranked AS (SELECT *, row_number() OVER (PARTITION BY model, hardware ORDER BY last_run DESC, version DESC) AS n
               FROM v)
    SELECT a.version AS version_a, b.version AS version_b, b.model, b.hardware
    FROM ranked b JOIN ranked a ON a.model = b.model AND a.hardware IS NOT DISTINCT FROM b.hardware AND a.n = 2
    WHERE b.n = 1
    ORDER BY a.last_run DESC, b.last_run DESC, b.model, b.hardware LIMIT 1
    """
    return df(con, sql, params)


def default_runs(con, f: Filters) -> pd.DataFrame:
    """The two runs the page opens on: the newest two of one model on one hardware, older as A. One
    row (run_a, run_b), none when no model ran twice on one hardware."""
    cte, params = runs_cte(f)
    sql = f"""
    WITH {cte},
    ranked AS (SELECT run_id, model, hardware, run_time,
                      row_number() OVER (PARTITION BY model, hardware ORDER BY run_time DESC NULLS LAST, run_id DESC) AS n
               FROM fr WHERE model IS NOT NULL)
    SELECT a.run_id AS run_a, b.run_id AS run_b
    FROM ranked b JOIN ranked a ON a.model = b.model AND a.hardware IS NOT DISTINCT FROM b.hardware AND a.n = 2
    WHERE b.n = 1
    ORDER BY a.run_time DESC NULLS LAST, b.run_time DESC NULLS LAST LIMIT 1
    """
    return df(con, sql, params)


MISS_COLUMNS = ["compile_id_a", "compile_id_b", "compiled_frame", "cache", "graph", "outcome", "parts", "why",
                "changes"]


def misses_frame(misses) -> pd.DataFrame:
    """review.cache_miss.CacheMiss objects, one row each: where, which cache, A's outcome → B's, the
    key's parts that differed, the sentence, and the differing components before → after."""
    rows = [{"compile_id_a": m.baseline_compile_id, "compile_id_b": m.candidate_compile_id,
             "compiled_frame": f"{m.frame[0]} ({m.frame[1]}:{m.frame[2]})", "cache": m.cache, "graph": m.graph,
             "outcome": f"{m.baseline_outcome or '–'} → {m.candidate_outcome}", "parts": ", ".join(m.parts),
             "why": m.sentence(),
             "changes": "; ".join(f"{c.name}: {'(absent)' if c.before is None else c.before} → "
                                  f"{'(absent)' if c.after is None else c.after}" for c in m.changes[:20])}
            for m in misses]
    return pd.DataFrame(rows, columns=MISS_COLUMNS)


def cache_misses(con, f: Filters) -> pd.DataFrame:
    """Run B's compile-cache lookups that missed or were bypassed where run A's hit (or missed under
    another key), and which parts of the cache key differed (review/cache_miss.py). Reads the two
    runs' cache events and key components only."""
    from compilewatch.review.cache_miss import why_missed
    if mode(f) != "runs":
        return pd.DataFrame(columns=MISS_COLUMNS)
    return misses_frame(why_missed(con, f.run_id, f.run_b))
