"""Which cells of the day rollups (store/day_rollups.py) the global filters pick: a cell is a day x
model x hardware x torch version x label, so a query that takes only these filters can read the
day rollups instead of every run's rows."""
from __future__ import annotations

from compilewatch.app.filters import Filters, key_clauses


def cell_where(f: Filters, alias: str = "d") -> tuple[str, list]:
    """WHERE clause over a day-rollup table ``alias`` (store/day_rollups.py) picking the cells of the
    filtered runs: every global filter is a part of the cell, and a run's day is its run time's UTC
    day, so the cells picked hold exactly the runs runs_cte picks."""
    clauses, params = key_clauses(f, lambda col: f"{alias}.{col}")
    if f.start:
        clauses.append(f"{alias}.day >= ?")
        params.append(f.start)
    if f.end:
        clauses.append(f"{alias}.day <= ?")
        params.append(f.end)
    return (" AND ".join(clauses) or "TRUE"), params
