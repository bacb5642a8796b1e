"""The Compare page's queries for two torch versions at team-year scale, read from the cells and
from the runs' rollups, on the same store, in CPU and wall seconds.

    python benchmarks/gen_team_year.py --db .bench/team_year/compilewatch.duckdb
    python benchmarks/bench_compare.py --db .bench/team_year/compilewatch.duckdb [--repeat 5]

For each window (the page's default 90 days, the whole year, 90 days of one model) and each query
the two sides need (summary, break_diff, recompile_diff, speedup_diff, runtime) between the two
most-run torch versions, both sources app/queries/compare.py chooses between (reads_cells): the
cells (store/compare_cells.py and the bench weeks) and the sides' runs' rollups. Each source on
a connection of its own: "first" is its first call (DuckDB's buffers cold for what it reads), then
the best of --repeat of process CPU seconds (DuckDB's threads included, so a figure that does not
move with the machine's load) and wall seconds. Each pair of answers is compared too (equal up to
the order of the floating-point sums, rtol 1e-9; a break's type, reason and location are any one of
its occurrences'); exit status 1 when one differs.
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.app.filters import Filters  # noqa: E402
from compilewatch.app.queries import compare  # noqa: E402

from benchmarks.two_sources import arguments, store_facts, time_sources  # noqa: E402

SOURCES = {"cells": True, "runs": False}
QUERIES = ("summary", "break_diff", "recompile_diff", "speedup_diff", "runtime")
ANY = ["gb_type", "reason", "location"]


def _differences(view: str, answers: dict[str, dict[str, pd.DataFrame]]) -> list[str]:
    out = []
    for name, got in answers.items():
        cells, runs = (got[s].drop(columns=ANY, errors="ignore") for s in ("cells", "runs"))
        if name == "speedup_diff":   # rows of equal change keep no order
            cells, runs = (d.sort_values(["model", "hardware"], ignore_index=True) for d in (cells, runs))
        try:
            pd.testing.assert_frame_equal(cells, runs, rtol=1e-9, check_dtype=False)
        except AssertionError as e:
            out.append(f"{view}: {name} differs between the sources: {e}")
    return out


def main(argv=None) -> int:
    args = arguments(__doc__, argv)
    first, last, (a, b), n = store_facts(args.db, ("runs", "rollup_graph_breaks", "rollup_compare_day_breaks",
                                                   "rollup_compare_week_breaks", "rollup_compare_week_functions"))
    with duckdb.connect(str(args.db), read_only=True) as con:
        model = con.execute("SELECT model FROM runs GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    print(f"db {args.db}: " + ", ".join(f"{t} {v:,}" for t, v in n.items())
          + f"; torch {a} against {b}; load average {os.getloadavg()[0]:.1f}")
    days90 = Filters(start=last - timedelta(days=89), end=last, version_a=a, version_b=b, limit=50)
    views = {"90 days": days90, "whole year": days90.replace(start=first),
             f"90 days, model {model}": days90.replace(models=(model,))}
    chosen = compare.reads_cells

    def use(cells: bool):
        compare.reads_cells = lambda f: cells
        return lambda: setattr(compare, "reads_cells", chosen)
    differences = []
    for view, f in views.items():
        answers, cpu = time_sources(args.db, view, f, SOURCES, use, {q: getattr(compare, q) for q in QUERIES},
                                    args.repeat)
        differences += _differences(view, answers)
        print(f"{view}: the five queries, best cpu: cells {cpu['cells']:.3f} s, runs {cpu['runs']:.3f} s; "
              f"the page reads the {'cells' if chosen(f) else 'runs'}")
    print(*differences, f"load average at the end {os.getloadavg()[0]:.1f}", sep="\n")
    return int(bool(differences))


if __name__ == "__main__":
    sys.exit(main())
