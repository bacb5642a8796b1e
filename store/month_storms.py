"""Recompile storms: what a storm is, the storm rows (one per run and function that recompiled or hit
a limit, read from the per-run rollups of store/rollups.py), and the month level that keeps each month
cell's stormiest rows (table in migrations/026_month_storms.sql).

The storms table is a top N in one fixed order over a window's runs. Each row belongs to one run and
so to one month cell, and its place in the order depends on the row alone, so a window's top N rows
are among the top N of their own cells: the whole months of a window are read from the level, at most
ROWS_PER_CELL rows a cell, and only the partial months' runs row by row (app/queries/recompiles.py).
A cell's rows are chosen again whole whenever a run in it changes, in the same transaction, after the
month rollups (store/derived.py), never patched."""
from __future__ import annotations

from compilewatch.store.month_rollups import month_cells_match, month_cells_of
from compilewatch.store.run_keys import RUN_TIME

# A storm: the recompile limit was hit, or one function recompiled at least MANY_RECOMPILES times in
# a run (torch's default recompile_limit is 8), or BURST_PER_MINUTE recompiles landed within a minute.
MANY_RECOMPILES = 8
BURST_PER_MINUTE = 5
# the most rows the Recompile storms page shows at once (its "Show" choices); a larger request reads
# the per-run rows
ROWS_PER_CELL = 200
# Storms first, then limit hits, recompiles, the newest run; run_id last so that ties are cut the same
# way in a cell and in a window, which the level's exactness needs.
ORDER = "storm DESC, limit_hits DESC, recompiles DESC, run_time DESC, function, run_id"
COLUMNS = ("run_id", "run_time", "function", "file", "line", "recompiles", "limit_hits", "limit_name", "burst",
           "first_ts", "last_ts", "storm")


def storm_rows(runs: str) -> str:
    """SELECT of the storm rows of the runs in relation ``runs`` (its run_id and run_time, and any
    other columns, which every row of the run carries): ``runs``' columns, then function, file, line,
    recompiles, limit_hits, limit_name, burst, first_ts, last_ts and storm."""
    return f"""
    SELECT ru.*, j.function, j.file, j.line, j.recompiles, j.limit_hits, j.limit_name, j.burst, j.first_ts, j.last_ts,
           (j.limit_hits > 0 OR j.recompiles >= {MANY_RECOMPILES} OR j.burst >= {BURST_PER_MINUTE}) AS storm
    FROM (SELECT run_id, function,
                 coalesce(per.file, lh.file) AS file, coalesce(per.line, lh.line) AS line,
                 coalesce(per.recompiles, 0) AS recompiles, coalesce(lh.limit_hits, 0) AS limit_hits,
                 lh.limit_name, coalesce(per.burst, 0) AS burst, per.first_ts, per.last_ts
          FROM (SELECT rr.run_id, rr.function, rr.file, rr.line, rr.n AS recompiles, rr.first_ts, rr.last_ts, rr.burst
                FROM rollup_recompiles rr WHERE rr.run_id IN (SELECT run_id FROM {runs})) per
          FULL JOIN (SELECT lh.run_id, coalesce(lh.function, '?') AS function, sum(lh.n)::BIGINT AS limit_hits,
                            any_value(lh.limit_name) AS limit_name, any_value(lh.file) AS file,
                            any_value(lh.line) AS line
                     FROM rollup_limit_hits lh WHERE lh.run_id IN (SELECT run_id FROM {runs}) GROUP BY ALL) lh
          USING (run_id, function)) j
    JOIN {runs} ru USING (run_id)"""


_MONTH_CELL = ("month", "model", "hardware", "torch_version")
# the runs of the month cells matched on rollup_day_runs d ({where}), with their cell and run time
_CELL_RUNS = (f"(SELECT d.run_id, date_trunc('month', d.day)::DATE AS month, d.model, d.hardware, d.torch_version, "
              f"{RUN_TIME} AS run_time FROM rollup_day_runs d JOIN runs r USING (run_id) WHERE {{where}})")
_COLS = ", ".join((*_MONTH_CELL, *COLUMNS))


def _choose(where: str) -> str:
    """INSERT of the top ROWS_PER_CELL storm rows of each month cell matched by ``where`` (its
    parameters appear once: the cells' runs are a CTE)."""
    ranked = (f"SELECT *, row_number() OVER (PARTITION BY {', '.join(_MONTH_CELL)} ORDER BY {ORDER}) AS place "
              f"FROM ({storm_rows('cell_runs')})")
    return (f"INSERT INTO rollup_month_storms ({_COLS}) WITH cell_runs AS {_CELL_RUNS.format(where=where)} "
            f"SELECT {_COLS} FROM ({ranked}) WHERE place <= {ROWS_PER_CELL}")


def refresh_month_storms(con, day_cells=None) -> None:
    """Choose again the rows of the month cells that the day cells ``day_cells`` ((day, model,
    hardware, torch version, label) tuples, as day_rollups.refresh_day_rollups returns them) lie in,
    or of every month cell when None (a month at a time: a team-year's storm rows at once run past
    the writer's memory). Reads rollup_day_runs and the per-run rollups, which must be refreshed
    first. Runs inside the caller's transaction."""
    if day_cells is None:
        con.execute("DELETE FROM rollup_month_storms").fetchall()
        months = con.execute("SELECT DISTINCT date_trunc('month', day)::DATE FROM rollup_day_runs").fetchall()
        for (month,) in months:
            con.execute(_choose("date_trunc('month', d.day)::DATE IS NOT DISTINCT FROM ?"), [month]).fetchall()
        return
    month_cells = month_cells_of(day_cells)
    if not month_cells:
        return
    rows, rows_params, day_rows, day_rows_params = month_cells_match(month_cells)
    con.execute(f"DELETE FROM rollup_month_storms d WHERE {rows}", rows_params).fetchall()
    con.execute(_choose(day_rows), day_rows_params).fetchall()
