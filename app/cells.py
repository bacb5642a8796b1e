"""Which cells of the day and month rollups the global filters pick. A day cell (store/day_rollups.py)
is a day x model x hardware x torch version x label; a month cell (store/month_rollups.py) a month x
model x hardware x torch version. A query that takes only these filters reads the rollups instead of
every run's rows, and over a long window the whole months from the month rollups. The bench weeks
(store/bench_weeks.py) are cells of a week: a window's whole weeks (whole_weeks) come from them."""
from __future__ import annotations

from datetime import date, timedelta

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


def _month_start(d: date) -> date:
    return d.replace(day=1)


def whole_months(f: Filters) -> tuple[date | None, date | None] | None:
    """[first, after): the whole calendar months inside the window (None: unbounded on that side),
    or None when the window holds no whole month."""
    first = None
    if f.start:
        first = f.start if f.start.day == 1 else _month_start(_month_start(f.start) + timedelta(days=31))
    after = _month_start(f.end + timedelta(days=1)) if f.end else None
    if first and after and first >= after:
        return None
    return first, after


def month_span(f: Filters) -> tuple[date | None, date | None] | None:
    """The whole months (whole_months) a view over ``f`` reads from the month level, or None when it
    reads the day level alone: a window without a whole month, or a label filter, which a month
    cell does not keep."""
    return None if f.labels else whole_months(f)


def whole_weeks(f: Filters) -> tuple[date | None, date | None] | None:
    """[first, after): the whole weeks (Monday to Sunday, as date_trunc('week') makes them) inside
    the window (None: unbounded on that side), or None when the window holds no whole week."""
    first = f.start + timedelta(days=-f.start.weekday() % 7) if f.start else None
    after = f.end + timedelta(days=1) - timedelta(days=(f.end + timedelta(days=1)).weekday()) if f.end else None
    if first and after and first >= after:
        return None
    return first, after


def window_rows(kind: str, f: Filters, columns: str) -> tuple[str, list]:
    """(SQL of a relation, params): ``columns`` of the rollup rows of ``kind`` ("graph_breaks",
    "recompiles", "guard_failures", "compile_time", "run_totals", "speedups", "linkage", "linkage_bins")
    that hold exactly the filtered runs. The window's whole months (month_span) come from
    rollup_month_<kind> and the days of its partial months from rollup_day_<kind>: a year's view
    reads ~12 rows per model and key where the day rollups hold one per run and key. ``columns``
    must be in both tables (not day or label); a label filter, not part of a month cell, reads the
    day rollups alone."""
    months = month_span(f)
    if months is None:
        where, params = cell_where(f)
        return f"(SELECT {columns} FROM rollup_day_{kind} d WHERE {where})", params
    first, after = months
    keys, key_params = key_clauses(f, lambda col: f"d.{col}")
    in_months, month_params = [], []
    if first:
        in_months.append("d.{0} >= ?")
        month_params.append(first)
    if after:
        in_months.append("d.{0} < ?")
        month_params.append(after)
    month_where = " AND ".join([*keys, *(c.format("month") for c in in_months)]) or "TRUE"
    sql = f"SELECT {columns} FROM rollup_month_{kind} d WHERE {month_where}"
    params = key_params + month_params
    if in_months:   # the partial months' days, outside the whole months
        day_where, day_params = cell_where(f)
        sql += (f" UNION ALL SELECT {columns} FROM rollup_day_{kind} d WHERE {day_where}"
                f" AND NOT ({' AND '.join(c.format('day') for c in in_months)})")
        params += day_params + month_params
    return f"({sql})", params
