"""Shared SQL pieces: the filtered-runs CTE every page query starts from."""
from __future__ import annotations

from datetime import datetime, time, timedelta

import pandas as pd

from compilewatch.app.filters import Filters, key_clauses
from compilewatch.store.run_keys import HARDWARE, RUN_TIME
from compilewatch.store.run_speedups import geomean  # noqa: F401  (the pages' geomean, as the rollups take it)


def geomean_sums(logs: str, n: str, where: str | None = None) -> str:
    """geomean() over cells that hold the sum of the logs of their positive values (``logs``) and
    how many there are (``n``), of the cells ``where`` picks: the logs' mean is their sum over
    their count, so cells add up exactly."""
    return f"exp({mean_sums(logs, n, where)})"


def mean_sums(total: str, n: str, where: str | None = None) -> str:
    """avg() over cells that hold a sum (``total``) and a count (``n``) of values, of the cells
    ``where`` picks; null where they hold none, as avg() of no values."""
    flt = f" FILTER (WHERE {where})" if where else ""
    return f"sum({total}){flt} / nullif(sum({n}){flt}, 0)"


def run_where(f: Filters, *, use_time: bool = True, use_models: bool = True,
              use_versions: bool = True) -> tuple[str, list]:
    """WHERE clause over ``runs r`` for the global filters, and its parameters."""
    skip = (() if use_models else ("models",)) + (() if use_versions else ("torch_versions",))
    clauses, params = key_clauses(f, lambda col: HARDWARE if col == "hardware" else f"r.{col}", skip)
    if use_time and f.start:
        clauses.append(f"{RUN_TIME} >= ?")
        params.append(datetime.combine(f.start, time.min))
    if use_time and f.end:
        clauses.append(f"{RUN_TIME} < ?")
        params.append(datetime.combine(f.end + timedelta(days=1), time.min))
    return (" AND ".join(clauses) or "TRUE"), params


def runs_cte(f: Filters, name: str = "fr", **kw) -> tuple[str, list]:
    """``name AS (...)``: run_id, model, torch_version, label, git_commit, hardware, run_time of the filtered runs."""
    where, params = run_where(f, **kw)
    sql = (f"{name} AS (SELECT r.run_id, r.model, r.torch_version, r.label, r.git_commit, "
           f"{HARDWARE} AS hardware, {RUN_TIME} AS run_time FROM runs r WHERE {where})")
    return sql, params


def per_hardware(name: str, source: str) -> str:
    """``name`` qualified by the hardware when ``source`` (a relation with name and hardware) spans
    several kinds: a speedup or a step time is only comparable on the same hardware, so two kinds
    never share a line, a bar or a delta."""
    return (f"CASE WHEN (SELECT count(DISTINCT hardware) FROM {source}) > 1 "
            f"THEN {name} || ' · ' || hardware ELSE {name} END")


def df(con, sql: str, params: list | None = None) -> pd.DataFrame:
    """Run one query on its own cursor (connections are not thread-safe) and return a DataFrame."""
    cur = con.cursor()
    try:
        return cur.execute(sql, params or []).df()
    finally:
        cur.close()


def data_bounds(con, f: Filters | None = None) -> pd.DataFrame:
    """One row: first and last run day, run count. Used for the default time window."""
    return df(con, f"SELECT min({RUN_TIME})::DATE AS first_day, max({RUN_TIME})::DATE AS last_day, "
                   f"count(*) AS runs FROM runs r")


def filter_options(con, f: Filters | None = None) -> pd.DataFrame:
    """Distinct models, torch versions, labels and hardware for the sidebar pickers (kind, value, runs)."""
    return df(con, f"""
        SELECT 'model' AS kind, model AS value, count(*) AS runs FROM runs WHERE model IS NOT NULL GROUP BY model
        UNION ALL
        SELECT 'torch_version', torch_version, count(*) FROM runs WHERE torch_version IS NOT NULL GROUP BY torch_version
        UNION ALL
        SELECT 'label', label, count(*) FROM runs WHERE label IS NOT NULL GROUP BY label
        UNION ALL
        SELECT 'hardware', {HARDWARE}, count(*) FROM runs r GROUP BY 2
        ORDER BY kind, value""")
