"""Day rollups (tables in migrations/010_day_rollups.sql): the per-run rollups (store/rollups.py)
summed per cell (day x model x hardware x torch version x label) and key, so a view over a long
window reads rows that grow with days x keys, not with runs.

A cell is summed again whole from the per-run rollups of the runs it holds, never patched: after a
run's files change, the run's old cell (from rollup_day_runs) and its new one (from its runs row)
are deleted and summed again, in the same transaction, so a duplicate, a reingest, a killed ingest
or a run that moves to another day all end with the sums over the runs as they are stored.
"""
from __future__ import annotations

from collections.abc import Sequence

from compilewatch.store import sketch
from compilewatch.store.linkage import MEDIANS, per_run
from compilewatch.store.run_filter import runs_match, runs_param
from compilewatch.store.run_keys import HARDWARE, RUN_TIME
from compilewatch.store.run_speedups import run_speedups

_RUN_TIME = RUN_TIME.replace("r.", "rt.")

CELL = ("day", "model", "hardware", "torch_version", "label")
_CELL_COLS = ", ".join(f"m.{c}" for c in CELL)
# {flt}: which cells, over the membership rows ``m``
# A per-run rollup has one row per run and key, so at a key as fine as the per-run rollup's (or
# finer) count(*) counts the runs; coarser keys group per run first. Both are plain GROUP BYs, which
# DuckDB spills to disk under the writer's memory limit (a count(DISTINCT) is held in memory).
_C = ", ".join(CELL)
_DAY = {
    "rollup_day_guard_failures": f"""
        WITH s AS (SELECT {_CELL_COLS}, g.run_id, g.category, g.guard_key, g.function, g.n, g.raw,
                          g.source_name, g.expected, g.actual,
                          coalesce(g.guard_key, left(g.raw, 120)) AS guard
                   FROM rollup_guard_failures g JOIN rollup_day_runs m USING (run_id) WHERE {{flt}})
        SELECT {_C}, 'key', category, guard, guard_key, function, sum(n), count(*),
               any_value(raw), any_value(source_name), any_value(expected), any_value(actual)
        FROM s GROUP BY {_C}, category, guard, guard_key, function
        UNION ALL
        SELECT {_C}, 'category', category, NULL, NULL, NULL, sum(n), count(*), NULL, NULL, NULL, NULL
        FROM (SELECT {_C}, run_id, coalesce(category, 'other') AS category, sum(n) AS n FROM s GROUP BY ALL)
        GROUP BY {_C}, category
        UNION ALL
        SELECT {_C}, 'guard', NULL, guard, NULL, NULL, sum(n), count(*), NULL, NULL, NULL, NULL
        FROM (SELECT {_C}, run_id, guard, sum(n) AS n FROM s GROUP BY ALL)
        GROUP BY {_C}, guard""",
    "rollup_day_recompiles": f"""
        SELECT {_CELL_COLS}, rc.function, sum(rc.n), count(*)
        FROM rollup_recompiles rc JOIN rollup_day_runs m USING (run_id) WHERE {{flt}}
        GROUP BY ALL""",
    "rollup_day_compile_time": f"""
        SELECT {_CELL_COLS}, c.co_name, c.co_file, c.co_firstlineno, any_value(c.co_filename), count(*),
               sum(c.compiles), sum(c.recompiles), sum(c.total_s), sum(c.recompile_s), sum(c.tracing_s),
               sum(c.aot_s), sum(c.inductor_s), sum(c.autotune_s), sum(c.cache_misses), sum(c.cache_miss_s),
               sum(c.forward_s), sum(c.backward_s), sum(c.runtime_autotune_s)
        FROM rollup_compile_time c JOIN rollup_day_runs m USING (run_id) WHERE {{flt}}
        GROUP BY {_CELL_COLS}, c.co_name, c.co_file, c.co_firstlineno""",
    # the run's time from its runs row: the page shows when a break was first and last seen
    "rollup_day_graph_breaks": f"""
        SELECT {_CELL_COLS}, g.break_key, sum(g.n), count(*), min(g.t), max(g.t), any_value(g.gb_type),
               any_value(g.gb_code), arg_max(g.reason, g.t), any_value(g.explanation), any_value(g.hints),
               any_value(g.user_file), any_value(g.user_line), any_value(g.user_function),
               arg_max(g.example_stack, g.t) FILTER (WHERE g.example_stack IS NOT NULL),
               max(g.t) FILTER (WHERE g.example_stack IS NOT NULL)
        FROM (SELECT rg.*, {_RUN_TIME} AS t FROM rollup_graph_breaks rg JOIN runs rt USING (run_id)) g
        JOIN rollup_day_runs m USING (run_id) WHERE {{flt}}
        GROUP BY {_CELL_COLS}, g.break_key""",
    # the Overview's KPIs (migrations/028_overview_rollups.sql): every run of the cell, with its
    # totals or none
    "rollup_day_run_totals": f"""
        SELECT {_CELL_COLS}, count(*), sum(coalesce(t.graph_breaks, 0)), sum(coalesce(t.recompiles, 0)),
               sum(t.compile_s)
        FROM rollup_day_runs m LEFT JOIN rollup_run_totals t USING (run_id) WHERE {{flt}}
        GROUP BY {_CELL_COLS}""",
    # each run's geomean per bench model first (as the Overview's per-run path takes it), then their
    # logarithms summed per cell: a geomean over many cells' runs is exp(sum / runs)
    "rollup_day_speedups": f"""
        SELECT {_C}, bench_model, sum(ln(g)), count(*)
        FROM ({run_speedups("(SELECT * FROM rollup_day_runs m WHERE {flt})", CELL)})
        WHERE g > 0 GROUP BY {_C}, bench_model""",
    # the runtime linkage of the cell's runs (store/linkage.py): its sums, and the bins of each run's
    # figures whose medians the page shows (store/sketch.py), one row per metric and bin
    "rollup_day_linkage": f"""
        WITH m AS (SELECT * FROM rollup_day_runs m WHERE {{flt}}), {per_run("m")}
        SELECT {_CELL_COLS}, l.callable, l.mode, count(*), sum(l.calls), sum(l.compile_steps)
        FROM linked l JOIN m USING (run_id)
        GROUP BY {_CELL_COLS}, l.callable, l.mode""",
    "rollup_day_linkage_bins": f"""
        WITH m AS (SELECT * FROM rollup_day_runs m WHERE {{flt}}), {per_run("m")}
        SELECT {_CELL_COLS}, l.callable, l.mode, v.metric, {sketch.sign_of("v.value")}, {sketch.bin_of("v.value")},
               count(*)
        FROM linked l JOIN m USING (run_id),
             LATERAL (VALUES {", ".join(f"('{k}', l.{k})" for k in MEDIANS)}) v(metric, value)
        WHERE v.value IS NOT NULL
        GROUP BY ALL""",
}
TABLES = ("rollup_day_runs", *_DAY)
_MEMBERS = (f"SELECT r.run_id, ({RUN_TIME})::DATE, r.model, {HARDWARE}, r.torch_version, r.label "
            f"FROM runs r WHERE {{flt}}")
# one cell, nulls included (a run without a model is a cell of its own)
_IN_CELL = " AND ".join(f"{{a}}.{c} IS NOT DISTINCT FROM ?" for c in CELL)
# several cells, given as $1..$5, one array per column: a semi join, where one cell's equalities let
# DuckDB skip row groups (one run's refresh sums one cell or two: 1.3-1.5x faster than this form)
_CELLS = ("(SELECT unnest($1::DATE[]) AS day, unnest($2::VARCHAR[]) AS model, unnest($3::VARCHAR[]) AS hardware, "
          "unnest($4::VARCHAR[]) AS torch_version, unnest($5::VARCHAR[]) AS label)")
_IN_CELLS = ("EXISTS (SELECT 1 FROM " + _CELLS + " c WHERE "
             + " AND ".join(f"c.{c} IS NOT DISTINCT FROM {{a}}.{c}" for c in CELL) + ")")


def _cells_match(cells: set, a: str) -> tuple[str, list]:
    """SQL true for the rows of alias `a` in `cells`, and its parameters."""
    if len(cells) == 1:
        return _IN_CELL.format(a=a), list(next(iter(cells)))
    return _IN_CELLS.format(a=a), [list(col) for col in zip(*cells)]


def refresh_day_rollups(con, run_ids: Sequence[str] | None = None, tables: tuple[str, ...] = TABLES) -> set | None:
    """Sum the cells of the runs ``run_ids`` again (their old and their new cells), or every cell
    when None, from the per-run rollups, which must be refreshed first. Runs inside the caller's
    transaction. ``tables`` (with run_ids None) rebuilds only those: a migration's backfill sums
    the tables it added, and no table a later migration adds. Returns the cells summed again (None:
    all of them), whose month cells store/month_rollups.py then sums."""
    if run_ids is None:
        if "rollup_day_runs" in tables:
            con.execute("DELETE FROM rollup_day_runs").fetchall()
            con.execute(f"INSERT INTO rollup_day_runs {_MEMBERS.replace('{flt}', 'TRUE')}").fetchall()
        day_tables = {t: select for t, select in _DAY.items() if t in tables}
        for table in day_tables:
            con.execute(f"DELETE FROM {table}").fetchall()
        # a month at a time: one statement over a team-year's rollups runs past the writer's 64 MB
        months = con.execute("SELECT DISTINCT date_trunc('month', day) FROM rollup_day_runs").fetchall()
        for (month,) in months:
            for table, select in day_tables.items():
                flt = "date_trunc('month', m.day) IS NOT DISTINCT FROM ?"
                con.execute(f"INSERT INTO {table} {select.replace('{flt}', flt)}", [month]).fetchall()
        return None
    flt, param = runs_match(run_ids), [runs_param(run_ids)]
    cells_of = f"SELECT DISTINCT {', '.join(CELL)} FROM rollup_day_runs WHERE {flt}"
    cells = set(con.execute(cells_of, param).fetchall())
    con.execute(f"DELETE FROM rollup_day_runs WHERE {flt}", param).fetchall()
    con.execute(f"INSERT INTO rollup_day_runs {_MEMBERS.replace('{flt}', runs_match(run_ids, 'r.run_id'))}",
                param).fetchall()
    cells |= set(con.execute(cells_of, param).fetchall())
    if not cells:
        return cells
    for table, select in _DAY.items():
        rows, params = _cells_match(cells, table)
        con.execute(f"DELETE FROM {table} WHERE {rows}", params).fetchall()
        members, params = _cells_match(cells, "m")
        con.execute(f"INSERT INTO {table} {select.replace('{flt}', members)}", params).fetchall()
    return cells
