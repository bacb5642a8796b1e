"""Per-run facts derived from a run's stored rows: its hardware (store/hardware.py), its
metrics (store/run_metrics.py), its rollups (store/rollups.py), the day rollups of its cell
(store/day_rollups.py), the month rollups of that cell's month (store/month_rollups.py), its
stormiest rows (store/month_storms.py), the bench weeks of its week (store/bench_weeks.py) and
Compare's day and week cells (store/compare_cells.py).
Refreshed inside the ingest transaction of each of the run's files, or, when the writer keeps its
connection across files, once for all the runs it marked before it lets the lock go (mark_stale,
refresh_stale: one statement per table for all of them); after a reingest; and for every stored
run when the migration that added them is applied."""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from functools import partial

import duckdb

from compilewatch.store.bench_weeks import refresh_bench_weeks
from compilewatch.store.compare_cells import KINDS as COMPARE_KINDS
from compilewatch.store.compare_cells import refresh_compare_cells
from compilewatch.store.day_rollups import TABLES as DAY_TABLES
from compilewatch.store.day_rollups import refresh_day_rollups
from compilewatch.store.hardware import refresh_hardware
from compilewatch.store.month_rollups import TABLES as MONTH_TABLES
from compilewatch.store.month_rollups import refresh_month_rollups
from compilewatch.store.month_storms import refresh_month_storms
from compilewatch.store.rollups import TABLES as ROLLUP_TABLES
from compilewatch.store.rollups import refresh_rollups
from compilewatch.store.run_metrics import refresh_run_metrics

# The backfills of what migrations added, each after the newest migration whose tables its SQL reads,
# in that migration's transaction: a store migrated from further back gets each once, in order (an
# earlier backfill would read tables not created yet).
BACKFILLS = {
    "007_cudagraphs.sql": (refresh_hardware,),
    "009_rollups_review.sql": (partial(refresh_rollups, tables=("rollup_graph_breaks", "rollup_recompiles",
                                                                "rollup_guard_failures", "rollup_limit_hits")),),
    "010_day_rollups.sql": (partial(refresh_day_rollups, tables=("rollup_day_runs", "rollup_day_guard_failures",
                                                                 "rollup_day_recompiles")),),
    "011_day_graph_breaks.sql": (partial(refresh_day_rollups, tables=("rollup_day_graph_breaks",)),),
    "012_run_totals.sql": (partial(refresh_rollups, tables=("rollup_run_totals",)),),
    "013_step_rollup.sql": (partial(refresh_rollups, tables=("rollup_steps",)),),
    "014_month_rollups.sql": (partial(refresh_month_rollups, tables=("rollup_month_guard_failures",
                                                                     "rollup_month_recompiles",
                                                                     "rollup_month_graph_breaks")),),
    # compile time reads later_compile_metrics and the columns 018 adds (its backfills moved here
    # from 009, 010 and 014); stored runs count their backward and runtime autotuning once
    # `compilewatch reingest` has parsed them (parser version 8)
    "018_compile_total.sql": (partial(refresh_rollups, tables=("rollup_compile_time", "rollup_run_totals")),
                              partial(refresh_day_rollups, tables=("rollup_day_compile_time",)),
                              partial(refresh_month_rollups, tables=("rollup_month_compile_time",))),
    # fingerprints come from the parser: until `compilewatch reingest` a stored run's frames are listed
    # with no parts (rollups.py), which the review reads as "not known", never as "changed"
    "020_frame_fingerprints.sql": (partial(refresh_rollups, tables=("rollup_frame_fingerprints",)),),
    # run_metrics reads later_compile_metrics (018), host_probes (019) and timing_summaries' CUDA-graph
    # columns (023): its backfill runs once all are there. The heap column (025) is read from then on;
    # no stored row can hold a heap figure before 025 adds it, so 025 needs no backfill.
    "023_cudagraph_coverage.sql": (partial(refresh_run_metrics, heap=False),),
    "026_month_storms.sql": (refresh_month_storms,),
    "027_bench_weeks.sql": (refresh_bench_weeks,),
    # the Overview's KPIs per cell: summed from rollup_run_totals (012, 018) and bench_results, a
    # month at a time like the day and month rollups before them
    "028_overview_rollups.sql": (partial(refresh_day_rollups, tables=("rollup_day_run_totals", "rollup_day_speedups")),
                                 partial(refresh_month_rollups, tables=("rollup_month_run_totals",
                                                                        "rollup_month_speedups"))),
    # the runtime linkage's cells read rollup_steps (013), run_metrics (its backfill above) and bench_results
    "029_linkage_rollups.sql": (partial(refresh_day_rollups, tables=("rollup_day_linkage", "rollup_day_linkage_bins")),
                                partial(refresh_month_rollups, tables=("rollup_month_linkage",
                                                                       "rollup_month_linkage_bins"))),
    # Compare's cells read the per-run rollups (009, 012, 018) and run_metrics (023)
    "030_compare_cells.sql": (refresh_compare_cells,),
}


# Runs refreshed per statement by refresh_stale: its statements' groups stay small however many
# runs a long hold marked.
RUNS_PER_REFRESH = 500


def refresh_runs(con, run_ids: Sequence[str]) -> None:
    """Rebuild the derived facts of the runs ``run_ids``, one statement per table for all of them.
    Runs inside the caller's transaction."""
    if not run_ids:
        return
    refresh_hardware(con, run_ids)
    refresh_run_metrics(con, run_ids)
    refresh_rollups(con, run_ids)
    cells = refresh_day_rollups(con, run_ids)   # after the per-run rollups it sums
    refresh_month_rollups(con, cells)           # after the day rollups it sums
    refresh_month_storms(con, cells)            # after the per-run rollups and the cells' members
    refresh_bench_weeks(con, cells)             # the weeks of the day cells summed again
    refresh_compare_cells(con, cells)           # Compare's day cells and their weeks


def refresh_run(con, run_id: str) -> None:
    refresh_runs(con, [run_id])


def mark_stale(con, run_id: str) -> None:
    """Record, in the caller's transaction, that `run_id`'s derived facts lag its rows: what a
    writer does per file instead of refresh_run when it refreshes once before letting its lock go
    (EmbeddedStore.writes_held). The marker commits with the file's rows, so a writer killed before
    the refresh leaves it for the next one (refresh_stale)."""
    con.execute("INSERT INTO stale_runs VALUES (?)", [run_id]).fetchall()


def stale_runs(con) -> list[str]:
    """The marked runs, each once, in the order they were marked (the table only grows between
    refreshes); none in a store that predates the markers' table."""
    try:
        return [r for (r,) in con.execute(
            "SELECT run_id FROM stale_runs GROUP BY run_id ORDER BY min(rowid)").fetchall()]
    except duckdb.CatalogException:
        return []


def refresh_stale(con) -> int:
    """Refresh every marked run and drop the markers, inside the caller's transaction; the number
    of runs refreshed. All of them at once, a slice of runs per statement (refresh_runs)."""
    runs = stale_runs(con)
    for i in range(0, len(runs), RUNS_PER_REFRESH):
        refresh_runs(con, runs[i:i + RUNS_PER_REFRESH])
    if runs:
        con.execute("DELETE FROM stale_runs").fetchall()
    return len(runs)


def refresh_all(con) -> None:
    """Set-based, for every run at once: a team-year store backfills in seconds, not per run. Each
    table is committed on its own (con must not be in a transaction): DuckDB holds a transaction's
    new rows in memory until a row group fills, and every rollup of an organisation's year in one
    transaction ran past 2 GB."""
    steps = [refresh_hardware, refresh_run_metrics,
             *(partial(refresh_rollups, tables=(t,)) for t in ROLLUP_TABLES),
             *(partial(refresh_day_rollups, tables=(t,)) for t in DAY_TABLES),   # rollup_day_runs first
             *(partial(refresh_month_rollups, tables=(t,)) for t in MONTH_TABLES),
             refresh_month_storms,
             refresh_bench_weeks,
             *(partial(refresh_compare_cells, kinds=(k,)) for k in COMPARE_KINDS)]
    with rebuilding(con):
        for step in steps:
            con.execute("BEGIN")
            step(con)
            con.execute("COMMIT")


# While every run is rebuilt (a migration's backfill, refresh_all), DuckDB's temp files are capped:
# what one statement over a slice of runs spills is bounded (store/run_filter.py), and a store whose
# slices spill past this is refused with DuckDB's out-of-memory error, which the migration reports
# with its hint and rolls back, rather than filling the store's disk. No row's order matters to a
# rebuilt table, so DuckDB need not hold a statement's rows back to write them in the order they
# were selected.
REBUILD_SETTINGS = {"preserve_insertion_order": "false", "max_temp_directory_size": "'8GiB'"}


@contextmanager
def rebuilding(con):
    """REBUILD_SETTINGS on `con` for the block, each put back as it was afterwards."""
    before = {k: con.execute(f"SELECT current_setting('{k}')").fetchall()[0][0] for k in REBUILD_SETTINGS}
    for k, v in REBUILD_SETTINGS.items():
        con.execute(f"SET {k} = {v}")
    try:
        yield con
    finally:
        for k, v in before.items():
            con.execute(f"SET {k} = {str(v).lower() if isinstance(v, bool) else repr(str(v))}")


def after_migration(con, name: str) -> None:
    with rebuilding(con):
        for refresh in BACKFILLS.get(name, ()):
            refresh(con)
