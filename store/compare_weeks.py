"""Compare's week cells (tables in migrations/030_compare_weeks.sql): what the Compare page shows of
two torch versions, summed per week cell (week x model x hardware x torch version, the run's model:
store/bench_weeks.py makes the same cells of the bench rows), so a long window's sides read a few
rows per model, week and key instead of every run's rollup rows (app/queries/compare.py).

Each table's rows are sums over a set of runs grouped by some columns (``sums``): the week cells
here, a window's edge days on the page, and the page's two sides when it reads runs (two runs, or
labels and commits as the sides). The page then adds the groups up (``MERGE``), so each figure is
written once whichever way it is read.

A week cell is summed again whole from its runs' rollups, never patched, like the bench weeks: a
refresh sums again the cells of the weeks, models, hardware and torch versions of the day cells
store/day_rollups.py summed again (a run's old cell among them), and a cell holds one week's runs of
one model on one kind of hardware, however many runs the store holds.
"""
from __future__ import annotations

from compilewatch.store.bench_weeks import CELL, RUNS, week_of

# what Compare times: the timing hooks' steady step and iteration (store/run_metrics.py)
STEP_METRICS = ("iteration_time", "step_time")
_STEPS = ("SELECT run_id, metric, subject, value, spread FROM run_metrics "
          f"WHERE metric IN {STEP_METRICS!r} AND value IS NOT NULL")

# table -> (its rows' source, over the runs relation {runs} (alias r: run_id and the grouping
# columns); its key columns as (name, SQL); its sums as (name, SQL); how groups of it add up, as
# (name, SQL over the sums' columns)). A source's per-run tables are cut to the runs first: a
# refresh's few cells join their own rows, not every run's.
_IN_RUNS = "run_id IN (SELECT run_id FROM {runs})"
_TABLES = {
    "rollup_week_totals": (
        "{runs} r LEFT JOIN rollup_run_totals t USING (run_id)", (),
        (("runs", "count(*)"), ("graph_breaks", "sum(t.graph_breaks)"), ("recompiles", "sum(t.recompiles)"),
         ("limit_hits", "sum(t.limit_hits)"), ("compile_s", "sum(t.compile_s)")),
        (("runs", "sum(runs)"), ("graph_breaks", "sum(graph_breaks)"), ("recompiles", "sum(recompiles)"),
         ("limit_hits", "sum(limit_hits)"), ("compile_s", "sum(compile_s)"))),
    "rollup_week_breaks": (
        f"(SELECT * FROM rollup_graph_breaks WHERE {_IN_RUNS}) g JOIN {{runs}} r USING (run_id)",
        (("break_key", "g.break_key"),),
        (("n", "sum(g.n)"), ("runs", "count(*)"), ("gb_type", "any_value(g.gb_type)"),
         ("reason", "any_value(g.reason)"), ("location", "any_value(g.user_file || ':' || g.user_line)")),
        (("n", "sum(n)"), ("runs", "sum(runs)"), ("gb_type", "any_value(gb_type)"), ("reason", "any_value(reason)"),
         ("location", "any_value(location)"))),
    # a limit hit or a guard failure that names no function counts under '?', as the page lists it
    "rollup_week_functions": (
        f"""(SELECT run_id, 'recompiles' AS kind, function, NULL::VARCHAR AS category, n FROM rollup_recompiles
             WHERE {_IN_RUNS}
             UNION ALL SELECT run_id, 'limit_hits', coalesce(function, '?'), NULL, n FROM rollup_limit_hits
             WHERE {_IN_RUNS}
             UNION ALL SELECT run_id, 'guard_failures', coalesce(function, '?'), category, n FROM rollup_guard_failures
             WHERE category IS NOT NULL AND {_IN_RUNS}) x JOIN {{runs}} r USING (run_id)""",
        (("kind", "x.kind"), ("function", "x.function"), ("category", "x.category")),
        (("n", "sum(x.n)"),), (("n", "sum(n)"),)),
    # the values sorted, so that a cell's row is the same however its runs came in
    "rollup_week_steps": (
        f"(SELECT * FROM ({_STEPS}) WHERE {_IN_RUNS}) m JOIN {{runs}} r USING (run_id)",
        (("metric", "m.metric"), ("subject", "m.subject")),
        (("runs", "count(DISTINCT run_id)"), ("low", "min(m.value)"), ("high", "max(m.value)"),
         ("vals", "list_sort(list(m.value))"),
         ("spreads", "list_sort(list(m.spread) FILTER (WHERE m.spread IS NOT NULL))")),
        (("runs", "sum(runs)"), ("low", "min(low)"), ("high", "max(high)"), ("vals", "flatten(list(vals))"),
         ("spreads", "flatten(list(spreads))"))),
}
TABLES = tuple(_TABLES)


def keys(table: str) -> tuple[str, ...]:
    """The key columns of ``table``'s rows, after the grouping columns."""
    return tuple(name for name, _ in _TABLES[table][1])


def sums(table: str, runs: str, group: tuple[str, ...]) -> str:
    """SELECT of ``table``'s rows summed from the rollups of the runs relation ``runs`` (SQL: run_id
    and the ``group`` columns), one row per group and key."""
    source, key_cols, sum_cols, _ = _TABLES[table]
    cols = [*(f"r.{g}" for g in group), *(f"{sql} AS {name}" for name, sql in (*key_cols, *sum_cols))]
    return f"SELECT {', '.join(cols)} FROM {source.replace('{runs}', runs)} GROUP BY ALL"


def merged(table: str, rows: str, group: tuple[str, ...]) -> str:
    """SELECT of the groups of ``table``'s rows in relation ``rows`` added up per ``group`` and key."""
    _, key_cols, _, merge = _TABLES[table]
    cols = [*group, *(name for name, _ in key_cols), *(f"{sql} AS {name}" for name, sql in merge)]
    return f"SELECT {', '.join(cols)} FROM {rows} GROUP BY ALL"


def runs_of(where: str) -> str:
    """The runs relation of the runs that ``where`` picks (over RUNS' columns, alias r), with their
    week cell's columns."""
    return f"(SELECT * FROM ({RUNS}) r WHERE {where})"


# several week cells, given as $1..$4, one array per column
_CELLS = ("EXISTS (SELECT 1 FROM (SELECT unnest($1::DATE[]) AS week, unnest($2::VARCHAR[]) AS model, "
          "unnest($3::VARCHAR[]) AS hardware, unnest($4::VARCHAR[]) AS torch_version) c "
          "WHERE c.week IS NOT DISTINCT FROM {a}.week AND c.model IS NOT DISTINCT FROM {a}.model "
          "AND c.hardware IS NOT DISTINCT FROM {a}.hardware AND c.torch_version IS NOT DISTINCT FROM {a}.torch_version)")


def refresh_compare_weeks(con, day_cells=None, tables: tuple[str, ...] = TABLES) -> None:
    """Sum again every week cell of the weeks, models, hardware and torch versions of the day cells
    ``day_cells`` ((day, model, hardware, torch version, label) tuples, as day_rollups.
    refresh_day_rollups returns them), or every cell when None, from the per-run rollups, which
    must be refreshed first. Runs inside the caller's transaction."""
    if day_cells is None:
        for table in tables:
            con.execute(f"DELETE FROM {table}").fetchall()
        # a month at a time (the month of the week's Monday, so a week is never split), as the day
        # and month rollups rebuild: a team store holds 300,000 runs
        month = "date_trunc('month', r.week)::DATE"
        for (m,) in con.execute(f"SELECT DISTINCT {month} FROM ({RUNS}) r").fetchall():
            for table in tables:
                con.execute(f"INSERT INTO {table} {sums(table, runs_of(f'{month} IS NOT DISTINCT FROM $1'), CELL)}",
                            [m]).fetchall()
        return
    cells = {(week_of(day) if day is not None else None, model, hardware, torch)
             for day, model, hardware, torch, _label in day_cells}
    if not cells:
        return
    params = [list(col) for col in zip(*cells)]
    for table in tables:
        con.execute(f"DELETE FROM {table} w WHERE {_CELLS.format(a='w')}", params).fetchall()
        con.execute(f"INSERT INTO {table} {sums(table, runs_of(_CELLS.format(a='r')), CELL)}", params).fetchall()
