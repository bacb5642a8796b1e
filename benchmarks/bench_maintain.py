"""What `compilewatch store maintain` does for a DuckLake team store after many small ingests.

    python benchmarks/bench_maintain.py [--ingests 1000] [--json out.json]

A local PostgreSQL (store/pglocal.py, started here) and a fresh DuckLake store; then --ingests
separate ingests of one real collector bundle each (sample_logs/cpu-torch2.13/, each re-sent under
a new run id), as a team server's inbox sees them: every ingest is a DuckLake snapshot with its own
small Parquet files. Printed before and after `maintain`: the Parquet files and bytes under the
data path, and the cold and warm latency of the dashboard's heaviest store reads (the Overview's
KPIs and verdicts, hotspots, storms): cold is a fresh process-level connection, as the first page
load after a dashboard restart; warm is the same query again. The load average is printed with
the figures: this is a shared 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_lake_ingest import make_bundles  # noqa: E402
from compilewatch.app.filters import Filters  # noqa: E402
from compilewatch.app.queries import hotspots, overview, recompiles  # noqa: E402
from compilewatch.app.queries import review as review_q  # noqa: E402
from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.store import open_store  # noqa: E402
from compilewatch.store.maintain import parquet_files  # noqa: E402
from compilewatch.store.pglocal import LocalPostgres  # noqa: E402

QUERIES = (("overview kpis", overview.kpis), ("overview verdicts", review_q.verdicts),
           ("hotspots", hotspots.hotspots), ("storms", recompiles.storms))


def page_latency(spec: str, data_path: Path, f: Filters) -> dict:
    """Seconds per query: cold (a new store object, so a new DuckDB instance and catalog attach) and warm."""
    out = {}
    store = open_store(spec, data_path)
    t = time.perf_counter()
    with store.read() as con:
        con.execute("SELECT count(*) FROM runs").fetchall()
    out["open"] = time.perf_counter() - t
    for name, fn in QUERIES:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            with store.read() as con:
                fn(con, f)
            times.append(time.perf_counter() - t)
        out[name] = {"cold": times[0], "warm": times[1]}
    store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingests", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-maintain-"))
    tmp.chmod(0o755)  # the server runs as the postgres user when this runs as root
    pg = LocalPostgres(tmp / "postgres")
    try:
        bundles = make_bundles(args.ingests, tmp)
        pg.start()
        pg.create_database("maintain", fresh=True)
        spec, data = pg.lake_spec("maintain"), tmp / "lake"
        store = open_store(spec, data)
        t = time.perf_counter()
        for b in bundles:
            assert ingest_paths(store, [b]).ok
        ingest_s = time.perf_counter() - t
        store.close()
        today = date.today()
        f = Filters(start=today - timedelta(days=6), end=today)
        lake = data / "lake"
        before = {"parquet_files": parquet_files(lake), "bytes": sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()),
                  "latency": page_latency(spec, data, f)}
        t = time.perf_counter()
        result = open_store(spec, data).maintain(expire_older_than_days=0)
        maintain_s = time.perf_counter() - t
        after = {"parquet_files": parquet_files(lake), "bytes": sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()),
                 "latency": page_latency(spec, data, f)}
        out = {"ingests": args.ingests, "ingest_s": ingest_s, "maintain_s": maintain_s, "steps": result.steps,
               "before": before, "after": after, "load_average": os.getloadavg()[0]}
        print(f"{args.ingests} ingests in {ingest_s:.0f} s; maintain {maintain_s:.1f} s ({', '.join(result.steps)}); "
              f"load average {out['load_average']:.1f}")
        print(f"Parquet files {before['parquet_files']:,} -> {after['parquet_files']:,}; "
              f"{before['bytes'] / 2**20:.1f} MiB -> {after['bytes'] / 2**20:.1f} MiB")
        for name, _ in QUERIES:
            b, a = before["latency"][name], after["latency"][name]
            print(f"  {name:<18} cold {b['cold']:6.2f} s -> {a['cold']:6.2f} s   warm {b['warm']:6.2f} s -> {a['warm']:6.2f} s")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
    finally:
        pg.stop("immediate")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
