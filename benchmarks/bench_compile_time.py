"""The Compile time page's and the Ranks tab's queries at team-year scale, in CPU and wall seconds.

    python benchmarks/gen_team_year.py --db .bench/team_year/compilewatch.duckdb
    python benchmarks/bench_compile_time.py --db .bench/team_year/compilewatch.duckdb [--repeat 3]

bench_pages.py times whole pages in wall seconds, which on a shared machine measure the other
processes as much as ours. This prints, per query and window (the page's default 30 days, the
whole year), the best of --repeat runs of both: process CPU seconds (DuckDB's threads included,
so a figure that does not move with the machine's load) and wall seconds, plus the load average,
and the page's total against bench_pages' 2 s cold bar. Exit status 1 when the summed CPU seconds
of a page's queries, spread over DuckDB's threads, exceed that bar.

Then the runtime linkage both ways over long windows (every run; the year to the newest run, whose
first and last months are partial): from every run's figures (the exact path) and from its day and
month level (store/sketch.py bins), and, over every key, whether the counts agree and the worst
relative error of a level median against sketch.ALPHA (exit status 1 when they do not agree). The
store must hold the level: any store this version has opened does (migration 029 backfills it).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.app.filters import Filters  # noqa: E402
from compilewatch.app.queries import compile_time, ranks  # noqa: E402
from compilewatch.store import sketch  # noqa: E402
from compilewatch.store.linkage import MEDIANS  # noqa: E402

COLD_BAR_S = 2.0
LINKAGE_KEYS = ["model", "callable", "mode", "torch_version"]


def best(fn, con, f, repeat: int) -> tuple[float, float]:
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn(con, f)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def linkage_paths(con, end, repeat: int) -> bool:
    """Both paths of the runtime linkage timed over long windows, and the level checked against the
    exact path over every key: True when the counts agree and every median is within ALPHA."""
    agree = True
    for name, f in (("every run", Filters(limit=50)),
                    ("year to the newest run", Filters(start=end - timedelta(days=364), end=end, limit=50))):
        for fn in (compile_time.linkage_per_run, compile_time.linkage_per_cell):
            cpu, wall = best(fn, con, f, repeat)
            print(f"  linkage, {name:<23} {fn.__name__:<18} cpu {cpu:6.3f} s   wall {wall:6.3f} s")
        every = f.replace(limit=1_000_000)
        exact, level = (read(con, every).set_index(LINKAGE_KEYS).sort_index()
                        for read in (compile_time.linkage_per_run, compile_time.linkage_per_cell))
        counts = ["runs", "calls", "compile_steps"]
        same = list(exact.index) == list(level.index) and exact[counts].equals(level[counts])
        errors = [((level[c] - exact[c]).abs() / exact[c].abs()).max() for c in MEDIANS] if same else [1.0]
        worst = max((e for e in errors if e == e), default=0.0)   # a median null on both sides is no error
        ok = same and worst <= sketch.ALPHA * (1 + 1e-9)
        agree &= ok
        print(f"linkage, {name:<25} {len(exact)} keys, counts {'equal' if same else 'DIFFER'}, worst median error "
              f"{worst:.3%} (bound {sketch.ALPHA:.1%})  {'ok' if ok else 'OVER'}")
    return agree


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    con = duckdb.connect(str(args.db), read_only=True)
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    end = con.execute("SELECT max(coalesce(started_at, ingested_at))::DATE FROM runs").fetchone()[0]
    n = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "compiles", "step_timings")}
    heavy = con.execute("SELECT run_id FROM compiles GROUP BY run_id ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    print(f"db {args.db}: " + ", ".join(f"{t} {v:,}" for t, v in n.items()) +
          f"; DuckDB threads {threads}; load average {os.getloadavg()[0]:.1f}")
    views = [
        ("compile time, 30 days", Filters(start=end - timedelta(days=29), end=end, limit=50),
         [compile_time.phase_split, compile_time.frame_versions, compile_time.frame_hotspots,
          compile_time.runtime_linkage]),
        ("compile time, whole year", Filters(start=None, end=None, limit=50),
         [compile_time.phase_split, compile_time.frame_versions, compile_time.frame_hotspots,
          compile_time.runtime_linkage]),
        ("run detail ranks, heaviest run", Filters(run_id=heavy), [ranks.per_rank, ranks.rank_steps]),
    ]
    failed = False
    for name, f, fns in views:
        total_cpu = total_wall = 0.0
        for fn in fns:
            cpu, wall = best(fn, con, f, args.repeat)
            total_cpu += cpu
            total_wall += wall
            print(f"  {name:<32} {fn.__name__:<18} cpu {cpu:6.3f} s   wall {wall:6.3f} s")
        quiet = total_cpu / threads
        ok = quiet <= COLD_BAR_S
        failed |= not ok
        print(f"{name:<34} queries: cpu {total_cpu:.3f} s (/{threads} threads = {quiet:.3f} s), wall {total_wall:.3f} s"
              f"  {'ok' if ok else 'OVER'} against the {COLD_BAR_S:.0f} s cold bar")
    failed |= not linkage_paths(con, end, args.repeat)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
