"""Month rollups (tables in migrations/014_month_rollups.sql): the day rollups (store/day_rollups.py)
summed per month cell (month x model x hardware x torch version: a day cell without its day and
label) and key, so a whole-year view reads about one row per model, month and key.

A month cell is summed again whole from the day rows it holds, never patched, like a day cell:
after a run's day cells are summed again, the month cells they lie in are, in the same transaction.
"""
from __future__ import annotations

MONTH_CELL = ("month", "model", "hardware", "torch_version")
# month rollup -> (the day rollup it sums, its key columns, its aggregates in the table's column order)
_MONTH = {
    "rollup_month_guard_failures": (
        "rollup_day_guard_failures", "grain, category, guard, guard_key, function",
        "sum(n), sum(runs), any_value(raw), any_value(source_name), any_value(expected), any_value(actual)"),
    "rollup_month_recompiles": ("rollup_day_recompiles", "function", "sum(n), sum(runs)"),
    "rollup_month_compile_time": (
        "rollup_day_compile_time", "co_name, co_file, co_firstlineno",
        "any_value(co_filename), sum(runs), sum(compiles), sum(recompiles), sum(total_s), sum(recompile_s), "
        "sum(tracing_s), sum(aot_s), sum(inductor_s), sum(autotune_s), sum(cache_misses), sum(cache_miss_s), "
        "sum(forward_s), sum(backward_s), sum(runtime_autotune_s)"),
    # the latest reason and stack of the month: those of its latest day row, as a page takes the
    # latest across day rows
    "rollup_month_graph_breaks": (
        "rollup_day_graph_breaks", "break_key",
        "sum(n), sum(runs), min(first_seen), max(last_seen), any_value(gb_type), any_value(gb_code), "
        "arg_max(reason, last_seen), any_value(explanation), any_value(hints), any_value(user_file), "
        "any_value(user_line), any_value(user_function), "
        "arg_max(example_stack, stack_seen) FILTER (WHERE example_stack IS NOT NULL), max(stack_seen)"),
    # the Overview's KPIs (migrations/028_overview_rollups.sql): a cell's own figures, no key
    "rollup_month_run_totals": ("rollup_day_run_totals", "",
                                "sum(runs), sum(graph_breaks), sum(recompiles), sum(compile_s)"),
    "rollup_month_speedups": ("rollup_day_speedups", "bench_model", "sum(ln_sum), sum(runs)"),
    # bins merge by adding their counts (store/sketch.py)
    "rollup_month_linkage": ("rollup_day_linkage", "callable, mode", "sum(runs), sum(calls), sum(compile_steps)"),
    "rollup_month_linkage_bins": ("rollup_day_linkage_bins", "callable, mode, metric, sign, bin", "sum(n)"),
}
TABLES = tuple(_MONTH)
_MONTH_OF = "date_trunc('month', d.day)::DATE"
# one month cell, given as (a day in it, model, hardware, torch version); the day range lets DuckDB
# skip the day rollup's row groups of other months
_IN_MONTH_CELL = ("(d.day >= date_trunc('month', ?::DATE) AND d.day < date_trunc('month', ?::DATE) + INTERVAL 1 MONTH"
                  " OR (?::DATE IS NULL AND d.day IS NULL))"
                  " AND d.model IS NOT DISTINCT FROM ? AND d.hardware IS NOT DISTINCT FROM ?"
                  " AND d.torch_version IS NOT DISTINCT FROM ?")
_MONTH_CELL_ROWS = ("month IS NOT DISTINCT FROM date_trunc('month', ?::DATE)::DATE AND model IS NOT DISTINCT FROM ?"
                    " AND hardware IS NOT DISTINCT FROM ? AND torch_version IS NOT DISTINCT FROM ?")
# several month cells (a refresh of many runs at once), given as $1..$4, one array per column
# (months as their first days); $5 and $6, the first and the last of those months, let DuckDB skip
# the row groups of other months
_IN_MONTH_CELLS = (
    "({col} IS NULL OR {col} >= $5::DATE AND {col} < $6::DATE + INTERVAL 1 MONTH) AND EXISTS (SELECT 1 FROM "
    "(SELECT unnest($1::DATE[]) AS month, unnest($2::VARCHAR[]) AS model, unnest($3::VARCHAR[]) AS hardware, "
    "unnest($4::VARCHAR[]) AS torch_version) c WHERE c.month IS NOT DISTINCT FROM {month} "
    "AND c.model IS NOT DISTINCT FROM {a}.model AND c.hardware IS NOT DISTINCT FROM {a}.hardware "
    "AND c.torch_version IS NOT DISTINCT FROM {a}.torch_version)")


def _select(table: str, where: str) -> str:
    day_table, keys, aggs = _MONTH[table]
    cols = ", ".join(c for c in (_MONTH_OF, "d.model, d.hardware, d.torch_version", keys, aggs) if c)
    return f"SELECT {cols} FROM {day_table} d WHERE {where} GROUP BY ALL"


def refresh_month_rollups(con, day_cells=None, tables: tuple[str, ...] = TABLES) -> None:
    """Sum again the month cells that the day cells ``day_cells`` ((day, model, hardware, torch
    version, label) tuples, as day_rollups.refresh_day_rollups returns them) lie in, or every month
    cell when None, from the day rollups, which must be refreshed first. Runs inside the caller's
    transaction."""
    if day_cells is None:
        for table in tables:
            con.execute(f"DELETE FROM {table}").fetchall()
        # a month at a time: one statement over a team-year's day rollups runs past the writer's 64 MB
        months = con.execute(f"SELECT DISTINCT {_MONTH_OF} FROM rollup_day_runs d").fetchall()
        for (month,) in months:
            where = f"{_MONTH_OF} IS NOT DISTINCT FROM ?"
            for table in tables:
                con.execute(f"INSERT INTO {table} {_select(table, where)}", [month]).fetchall()
        return
    month_cells = month_cells_of(day_cells)
    if not month_cells:
        return
    rows, rows_params, day_rows, day_rows_params = month_cells_match(month_cells)
    for table in tables:
        con.execute(f"DELETE FROM {table} d WHERE {rows}", rows_params).fetchall()
        con.execute(f"INSERT INTO {table} {_select(table, day_rows)}", day_rows_params).fetchall()


def month_cells_of(day_cells) -> set:
    """The month cells (month as its first day, model, hardware, torch version) that the day cells
    ((day, model, hardware, torch version, label) tuples) lie in."""
    return {(day.replace(day=1) if day is not None else None, model, hardware, torch)
            for day, model, hardware, torch, _label in day_cells}


def month_cells_match(month_cells: set) -> tuple[str, list, str, list]:
    """SQL true for a month rollup's rows (alias d) in `month_cells`, and for the day rows they sum,
    each with its parameters: one cell's equalities, or the arrays of several (as day_rollups does)."""
    if len(month_cells) == 1:
        month, model, hardware, torch = next(iter(month_cells))
        return (_MONTH_CELL_ROWS, [month, model, hardware, torch],
                _IN_MONTH_CELL, [month, month, month, model, hardware, torch])
    months = [m for m, *_ in month_cells if m is not None]
    params = [list(col) for col in zip(*month_cells)] + [min(months, default=None), max(months, default=None)]
    return (_IN_MONTH_CELLS.format(col="d.month", month="d.month", a="d"), params,   # a month rollup's rows
            _IN_MONTH_CELLS.format(col="d.day", month=_MONTH_OF, a="d"), params)     # the day rows they sum
