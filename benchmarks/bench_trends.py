"""The Trends page's speedup queries at team-year scale, read from the bench weeks and from the bench
rows, on the same store, in CPU and wall seconds.

    python benchmarks/gen_team_year.py --db .bench/team_year/compilewatch.duckdb
    python benchmarks/bench_trends.py --db .bench/team_year/compilewatch.duckdb [--repeat 5]

For each window (the page's default 90 days, the whole year as bench_pages.py selects it, the year
for one model) and each query (trend, by_version, version_table between the two most-run torch
versions, and the CUDA-graph coverage below them), both sources app/queries/speedups.py chooses
between (_reads_weeks): the bench weeks (store/bench_weeks.py) and the bench rows. Each source on a
connection of its own: "first" is its first call (DuckDB's buffers cold for what it reads), then
the best of --repeat of process CPU seconds (DuckDB's threads included, so a figure that does not
move with the machine's load) and wall seconds. Each pair of answers is compared too (equal up to
the order of the floating-point sums, rtol 1e-9); exit status 1 when one differs.
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
from compilewatch.app.queries import cudagraphs, speedups  # noqa: E402

from benchmarks.two_sources import arguments, store_facts, time_sources  # noqa: E402

SOURCES = {"weeks": True, "rows": False}


def _differences(view: str, answers: dict[str, dict[str, pd.DataFrame]]) -> list[str]:
    """Each query whose two sources' answers differ (beyond the order of the floating-point sums,
    and of by_version's bars whose first runs tie)."""
    out = []
    for name, got in answers.items():
        if len(got) == 2:
            keys = [c for c in ("version", "model", "period") if c in got["rows"]]
            weeks, rows = (got[s].sort_values(keys, ignore_index=True) for s in ("weeks", "rows"))
            try:
                pd.testing.assert_frame_equal(weeks, rows, rtol=1e-9)
            except AssertionError as e:
                out.append(f"{view}: {name} differs between the sources: {e}")
    return out


def main(argv=None) -> int:
    args = arguments(__doc__, argv)
    first, last, (a, b), n = store_facts(args.db, ("runs", "bench_results", "rollup_week_bench"))
    with duckdb.connect(str(args.db), read_only=True) as con:
        model = con.execute("SELECT model FROM bench_results GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    print(f"db {args.db}: " + ", ".join(f"{t} {v:,}" for t, v in n.items()) + f"; load average {os.getloadavg()[0]:.1f}")
    year = Filters(start=first, end=last)
    views = {"90 days": Filters(start=last - timedelta(days=89), end=last), "whole year": year,
             f"year, model {model}": year.replace(models=(model,))}
    fns = {"trend": speedups.trend, "by_version": speedups.by_version,
           "version_table": lambda con, f: speedups.version_table(con, f.replace(version_a=b, version_b=a)),
           "coverage_trend": cudagraphs.coverage_trend}
    chosen = speedups._reads_weeks

    def use(weeks: bool):
        speedups._reads_weeks = lambda f, versions: weeks
        return lambda: setattr(speedups, "_reads_weeks", chosen)

    def one_source(name: str, source: str) -> bool:
        return name == "coverage_trend" and source == "weeks"    # one source: run_metrics
    differences = []
    for view, f in views.items():
        answers, _ = time_sources(args.db, view, f, SOURCES, use, fns, args.repeat, skip=one_source)
        differences += _differences(view, answers)
        print(f"{view}: the page reads the {'weeks' if chosen(f, versions=False) else 'rows'} for its trend, "
              f"the {'weeks' if chosen(f, versions=True) else 'rows'} for its versions")
    print(*differences, f"load average at the end {os.getloadavg()[0]:.1f}", sep="\n")
    return int(bool(differences))


if __name__ == "__main__":
    sys.exit(main())
