"""Bench weeks (table in migrations/027_bench_weeks.sql): the bench rows summed per week cell (week x
model x hardware x torch version), so the Trends page over a long window reads a few rows per model
and week instead of every bench row of the window (app/queries/speedups.py).

A week cell is summed again whole from the bench rows it holds, never patched, like a day cell. Which
cells a run's files touch: every cell of its old and its new day cell's week, hardware and torch
version (the day cells that store/day_rollups.py sums again, the old one read from rollup_day_runs
before it is replaced), whatever the model: a bench row names its own model, which no day cell
records. A week x hardware x torch version holds a week's runs of that kind at most, so what one
refresh sums stays the size of a week's, however many runs the store holds.
"""
from __future__ import annotations

from datetime import date, timedelta

from compilewatch.store.run_keys import HARDWARE, RUN_TIME

TABLES = ("rollup_week_bench",)
CELL = ("week", "model", "hardware", "torch_version")

# Each run with its week, hardware and torch version (its cell but the model), label and time, and
# its day (Compare's day cells: store/compare_cells.py).
RUNS = (f"SELECT r.run_id, r.model, {HARDWARE} AS hardware, r.torch_version, r.label, {RUN_TIME} AS run_time, "
        f"({RUN_TIME})::DATE AS day, date_trunc('week', {RUN_TIME})::DATE AS week FROM runs r")
# Each bench row of the runs {runs} picks (over RUNS' columns) with the keys of its cell: the model is
# the row's own (one CSV, many models), else its run's, as the Trends page names it. The runs are
# picked before the join: a refresh's few weeks join their own bench rows, not every run's.
BENCH_ROWS = ("SELECT b.run_id, coalesce(b.model, r.model) AS model, r.hardware, r.torch_version, r.label, "
              "r.run_time, r.week, b.speedup, b.compilation_latency_s, b.compression_ratio "
              f"FROM bench_results b JOIN (SELECT * FROM ({RUNS}) r WHERE {{runs}}) r USING (run_id)")


def _positive(col: str) -> str:
    # the page's geomean takes the logs of positive values only (app/queries/common.py: geomean)
    return f"CASE WHEN {col} > 0 THEN {col} END"


# A cell's figures from its bench rows (BENCH_ROWS): the table's columns after the cell's, each with
# its SQL. Also what a view sums on the fly for the days of a partial week at a window's edge.
SUMS = (("runs", "count(DISTINCT run_id)"),
         ("speedup_ln", f"sum(ln({_positive('speedup')}))"), ("speedups", f"count({_positive('speedup')})"),
         ("compile_s", "sum(compilation_latency_s)"), ("compiles", "count(compilation_latency_s)"),
         ("memory_ln", f"sum(ln({_positive('compression_ratio')}))"),
         ("memories", f"count({_positive('compression_ratio')})"),
         ("first_run", "min(run_time)"), ("last_run", "max(run_time)"),
         ("labels", "list_sort(list_distinct(list(label)))"))
COLUMNS = tuple(name for name, _ in SUMS)
# the figures that add up across cells by a plain sum (not runs: one run's bench rows may name
# several models, each in a cell of its own)
FIGURES = ("speedup_ln", "speedups", "compile_s", "compiles", "memory_ln", "memories")


def cell_rows(runs: str, rows: str = "TRUE") -> str:
    """SELECT of the week cells (table rows) summed from the bench rows of the runs ``runs`` picks
    (over RUNS' columns, alias r) that ``rows`` picks (over BENCH_ROWS' columns, alias b)."""
    sums = ", ".join(f"{sql} AS {name}" for name, sql in SUMS)
    return (f"SELECT {', '.join(CELL)}, {sums} FROM ({BENCH_ROWS.replace('{runs}', runs)}) b WHERE {rows} "
            f"GROUP BY {', '.join(CELL)}")


def week_of(day: date) -> date:
    """The Monday of ``day``'s week, as date_trunc('week') gives it."""
    return day - timedelta(days=day.weekday())


# several (week, hardware, torch version) slices, given as $1..$3, one array per column
_SLICES = ("EXISTS (SELECT 1 FROM (SELECT unnest($1::DATE[]) AS week, unnest($2::VARCHAR[]) AS hardware, "
           "unnest($3::VARCHAR[]) AS torch_version) c WHERE c.week IS NOT DISTINCT FROM {a}.week "
           "AND c.hardware IS NOT DISTINCT FROM {a}.hardware AND c.torch_version IS NOT DISTINCT FROM {a}.torch_version)")


def refresh_bench_weeks(con, day_cells=None) -> None:
    """Sum again every week cell of the weeks, hardware and torch versions of the day cells
    ``day_cells`` ((day, model, hardware, torch version, label) tuples, as day_rollups.
    refresh_day_rollups returns them), or every cell when None, from the bench rows. Runs inside the
    caller's transaction."""
    if day_cells is None:
        con.execute("DELETE FROM rollup_week_bench").fetchall()
        # a month at a time, as the day and month rollups rebuild: a team store holds 300,000 runs
        month = "date_trunc('month', r.week)::DATE"
        months = con.execute(f"SELECT DISTINCT {month} FROM ({RUNS}) r "
                             f"WHERE run_id IN (SELECT run_id FROM bench_results)").fetchall()
        for (m,) in months:
            con.execute(f"INSERT INTO rollup_week_bench {cell_rows(f'{month} IS NOT DISTINCT FROM ?')}",
                        [m]).fetchall()
        return
    slices = {(week_of(day) if day is not None else None, hardware, torch)
              for day, _model, hardware, torch, _label in day_cells}
    if not slices:
        return
    params = [list(col) for col in zip(*slices)]
    con.execute(f"DELETE FROM rollup_week_bench w WHERE {_SLICES.format(a='w')}", params).fetchall()
    con.execute(f"INSERT INTO rollup_week_bench {cell_rows(_SLICES.format(a='r'))}", params).fetchall()
