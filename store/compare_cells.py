"""Compare's cells (tables in migrations/030_compare_cells.sql): what the Compare page shows of two
torch versions, summed per day cell (day x model x hardware x torch version, the run's model; no
label) and per week cell (the same with the week, store/bench_weeks.py's cells of the bench rows),
so a long window's sides read its whole weeks and its edge days from a few rows per model and key,
never the runs' rollups (app/queries/compare.py).

Each table's rows are sums over a set of runs grouped by some columns (``sums``): the day cells
here, and the page's two sides when it reads runs (two runs, or labels and commits as the sides).
Groups add up (``merged``): a week cell sums its days here, and the page sums a side's cells, so
each figure is written once whichever way it is read.

A day cell is summed again whole from its runs' rollups, never patched, like store/day_rollups.py's
(whose refreshed cells, a run's old one among them, say which to sum again); then the week cells
they lie in are summed again from their days, as store/month_rollups.py sums a month. A day cell
holds one day's runs of one model on one kind of hardware, however many runs the store holds.
"""
from __future__ import annotations

from compilewatch.store.bench_weeks import RUNS, week_of

KINDS = ("totals", "breaks", "functions", "steps")
DAY_CELL = ("day", "model", "hardware", "torch_version")


def table(level: str, kind: str) -> str:
    """The table of ``kind`` at ``level`` ("day" or "week")."""
    return f"rollup_compare_{level}_{kind}"


TABLES = tuple(table(level, kind) for level in ("day", "week") for kind in KINDS)

# what Compare times: the timing hooks' steady step and iteration (store/run_metrics.py)
STEP_METRICS = ("iteration_time", "step_time")
_STEPS = ("SELECT run_id, metric, subject, value, spread FROM run_metrics "
          f"WHERE metric IN {STEP_METRICS!r} AND value IS NOT NULL")

# kind -> (its rows' source, over the runs relation {runs} (alias r: run_id and the grouping
# columns); its key columns as (name, SQL); its sums as (name, SQL); how groups of it add up, as
# (name, SQL over the sums' columns)). A source's per-run tables are cut to the runs first: a
# refresh's few cells join their own rows, not every run's.
_IN_RUNS = "run_id IN (SELECT run_id FROM {runs})"
_KINDS = {
    "totals": (
        "{runs} r LEFT JOIN rollup_run_totals t USING (run_id)", (),
        (("runs", "count(*)"), ("graph_breaks", "sum(t.graph_breaks)"), ("recompiles", "sum(t.recompiles)"),
         ("limit_hits", "sum(t.limit_hits)"), ("compile_s", "sum(t.compile_s)")),
        (("runs", "sum(runs)"), ("graph_breaks", "sum(graph_breaks)"), ("recompiles", "sum(recompiles)"),
         ("limit_hits", "sum(limit_hits)"), ("compile_s", "sum(compile_s)"))),
    "breaks": (
        f"(SELECT * FROM rollup_graph_breaks WHERE {_IN_RUNS}) g JOIN {{runs}} r USING (run_id)",
        (("break_key", "g.break_key"),),
        (("n", "sum(g.n)"), ("runs", "count(*)"), ("gb_type", "any_value(g.gb_type)"),
         ("reason", "any_value(g.reason)"), ("location", "any_value(g.user_file || ':' || g.user_line)")),
        (("n", "sum(n)"), ("runs", "sum(runs)"), ("gb_type", "any_value(gb_type)"), ("reason", "any_value(reason)"),
         ("location", "any_value(location)"))),
    # a limit hit or a guard failure that names no function counts under '?', as the page lists it
    "functions": (
        f"""(SELECT run_id, 'recompiles' AS kind, function, NULL::VARCHAR AS category, n FROM rollup_recompiles
             WHERE {_IN_RUNS}
             UNION ALL SELECT run_id, 'limit_hits', coalesce(function, '?'), NULL, n FROM rollup_limit_hits
             WHERE {_IN_RUNS}
             UNION ALL SELECT run_id, 'guard_failures', coalesce(function, '?'), category, n FROM rollup_guard_failures
             WHERE category IS NOT NULL AND {_IN_RUNS}) x JOIN {{runs}} r USING (run_id)""",
        (("kind", "x.kind"), ("function", "x.function"), ("category", "x.category")),
        (("n", "sum(x.n)"),), (("n", "sum(n)"),)),
    # the values sorted, so that a cell's row is the same however its runs came in
    "steps": (
        f"(SELECT * FROM ({_STEPS}) WHERE {_IN_RUNS}) m JOIN {{runs}} r USING (run_id)",
        (("metric", "m.metric"), ("subject", "m.subject")),
        (("runs", "count(DISTINCT run_id)"), ("low", "min(m.value)"), ("high", "max(m.value)"),
         ("vals", "list_sort(list(m.value))"),
         ("spreads", "list_sort(list(m.spread) FILTER (WHERE m.spread IS NOT NULL))")),
        (("runs", "sum(runs)"), ("low", "min(low)"), ("high", "max(high)"), ("vals", "list_sort(flatten(list(vals)))"),
         ("spreads", "list_sort(flatten(list(spreads)))"))),
}


def sums(kind: str, runs: str, group: tuple[str, ...]) -> str:
    """SELECT of ``kind``'s rows summed from the rollups of the runs relation ``runs`` (SQL: run_id
    and the ``group`` columns), one row per group and key."""
    source, key_cols, sum_cols, _ = _KINDS[kind]
    cols = [*(f"r.{g}" for g in group), *(f"{sql} AS {name}" for name, sql in (*key_cols, *sum_cols))]
    return f"SELECT {', '.join(cols)} FROM {source.replace('{runs}', runs)} GROUP BY ALL"


def merged(kind: str, rows: str, group: tuple[str, ...]) -> str:
    """SELECT of the groups of ``kind``'s rows in relation ``rows`` added up per ``group`` (column
    names, or ``SQL AS name``) and key."""
    _, key_cols, _, merge = _KINDS[kind]
    cols = [*group, *(name for name, _ in key_cols), *(f"{sql} AS {name}" for name, sql in merge)]
    return f"SELECT {', '.join(cols)} FROM {rows} GROUP BY ALL"


def runs_of(where: str) -> str:
    """The runs relation of the runs that ``where`` picks (over store/bench_weeks.py's RUNS, which
    gives each run its day and week, alias r)."""
    return f"(SELECT * FROM ({RUNS}) r WHERE {where})"


# several cells, given as $1..$4, one array per column: {level} (day or week) and its value in the
# rows of alias {a} ({date})
_CELLS = ("EXISTS (SELECT 1 FROM (SELECT unnest($1::DATE[]) AS {level}, unnest($2::VARCHAR[]) AS model, "
          "unnest($3::VARCHAR[]) AS hardware, unnest($4::VARCHAR[]) AS torch_version) c "
          "WHERE c.{level} IS NOT DISTINCT FROM {date} AND c.model IS NOT DISTINCT FROM {a}.model "
          "AND c.hardware IS NOT DISTINCT FROM {a}.hardware AND c.torch_version IS NOT DISTINCT FROM {a}.torch_version)")
_WEEK_OF_DAY = "date_trunc('week', d.day)::DATE"
# the day rows of several week cells ($1..$4 as _CELLS; $5 and $6 the first and the last Monday, so
# that DuckDB skips the day rows of other weeks)
_DAYS_OF_WEEKS = ("d.day >= $5::DATE AND d.day < $6::DATE + INTERVAL 7 DAY AND "
                  + _CELLS.format(level="week", date=_WEEK_OF_DAY, a="d"))


def _cells(level: str, a: str) -> str:
    return _CELLS.format(level=level, date=f"{a}.{level}", a=a)


def _weeks_from_days(kind: str, where: str) -> str:
    group = (f"{_WEEK_OF_DAY} AS week", "model", "hardware", "torch_version")
    return merged(kind, f"(SELECT * FROM {table('day', kind)} d WHERE {where}) d", group)


def refresh_compare_cells(con, day_cells=None, kinds: tuple[str, ...] = KINDS) -> None:
    """Sum again the day cells of the day cells ``day_cells`` ((day, model, hardware, torch version,
    label) tuples, as day_rollups.refresh_day_rollups returns them) from the per-run rollups, then
    the week cells they lie in from their days; or every cell when None. Runs inside the caller's
    transaction, after the per-run rollups."""
    if day_cells is None:
        for kind in kinds:
            for level in ("day", "week"):
                con.execute(f"DELETE FROM {table(level, kind)}").fetchall()
        # a month at a time (the month of the week's Monday, so that a week's days are summed in one
        # step), as the day and month rollups rebuild: a team store holds 300,000 runs
        month = "date_trunc('month', r.week)::DATE"
        week_in_month = f"date_trunc('month', {_WEEK_OF_DAY}) = $1"
        for (m,) in con.execute(f"SELECT DISTINCT {month} FROM ({RUNS}) r").fetchall():
            for kind in kinds:
                in_month = sums(kind, runs_of(f"{month} IS NOT DISTINCT FROM $1"), DAY_CELL)
                con.execute(f"INSERT INTO {table('day', kind)} {in_month}", [m]).fetchall()
                con.execute(f"INSERT INTO {table('week', kind)} {_weeks_from_days(kind, week_in_month)}", [m]).fetchall()
        return
    days = {(day, model, hardware, torch) for day, model, hardware, torch, _label in day_cells}
    if not days:
        return
    weeks = {(week_of(day), model, hardware, torch) for day, model, hardware, torch in days}
    day_params = [list(col) for col in zip(*days)]
    week_params = [list(col) for col in zip(*weeks)] + [min(w for w, *_ in weeks), max(w for w, *_ in weeks)]
    for kind in kinds:
        day_table, week_table = table("day", kind), table("week", kind)
        con.execute(f"DELETE FROM {day_table} d WHERE {_cells('day', 'd')}", day_params).fetchall()
        con.execute(f"INSERT INTO {day_table} {sums(kind, runs_of(_cells('day', 'r')), DAY_CELL)}", day_params).fetchall()
        con.execute(f"DELETE FROM {week_table} w WHERE {_cells('week', 'w')} AND w.week BETWEEN $5 AND $6",
                    week_params).fetchall()
        con.execute(f"INSERT INTO {week_table} {_weeks_from_days(kind, _DAYS_OF_WEEKS)}", week_params).fetchall()
