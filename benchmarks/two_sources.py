"""What the benchmarks that time one page's queries from two sources on one store share (the level a
view reads, and the rows it sums: bench_trends.py, bench_compare.py): the store's span and most-run
torch versions, and each query timed on a fresh connection per source, its answer kept to compare."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
import pandas as pd

from benchmarks.bench_compile_time import best


def arguments(doc: str, argv) -> argparse.Namespace:
    """--db (a store gen_team_year.py built) and --repeat, described by the script's docstring."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    return ap.parse_args(argv)


def store_facts(db: Path, tables: tuple[str, ...]) -> tuple:
    """(first day, last day, the two most-run torch versions, the rows of each of ``tables``)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        first, last = con.execute("SELECT min(coalesce(started_at, ingested_at))::DATE, "
                                  "max(coalesce(started_at, ingested_at))::DATE FROM runs").fetchone()
        versions = [r[0] for r in con.execute("SELECT torch_version FROM runs GROUP BY 1 ORDER BY count(*) DESC "
                                              "LIMIT 2").fetchall()]
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        return first, last, versions, counts
    finally:
        con.close()


def time_sources(db: Path, view: str, f, sources: dict, use, fns: dict, repeat: int,
                 skip=lambda name, source: False) -> tuple[dict[str, dict[str, pd.DataFrame]], dict[str, float]]:
    """Each of ``fns`` (name -> fn(con, f)) from each source (``use(value)`` makes the page read
    that source; what it returns undoes it), on a connection of its own: its first call (DuckDB's
    buffers cold for what it reads), then the best of ``repeat`` in process CPU seconds (DuckDB's
    threads included: a figure that does not move with the machine's load) and wall seconds, printed.
    Returns the answers per name and source, and each source's CPU seconds summed."""
    answers: dict[str, dict[str, pd.DataFrame]] = {}
    totals: dict[str, float] = {}
    for source, value in sources.items():
        undo = use(value)
        con = duckdb.connect(str(db), read_only=True)
        try:
            for name, fn in fns.items():
                if skip(name, source):
                    continue
                w0 = time.perf_counter()
                answers.setdefault(name, {})[source] = out = fn(con, f)
                cold = time.perf_counter() - w0
                cpu, wall = best(fn, con, f, repeat)
                totals[source] = totals.get(source, 0.0) + cpu
                print(f"  {view:<26} {name:<15} {source:<6} first {cold:6.3f} s   best cpu {cpu:6.3f} s"
                      f"   wall {wall:6.3f} s   ({len(out)} rows)")
        finally:
            con.close()
            undo()
    return answers, totals
