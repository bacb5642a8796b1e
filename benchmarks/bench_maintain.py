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
    out["load"] = os.getloadavg()[0]
    return out


def catalog_state(pg: LocalPostgres, dbname: str) -> dict:
    """What the catalog database holds: DuckLake's snapshots and live data files, the rows and dead
    row versions of its tables (PostgreSQL's own statistics; a dead version is left by a DELETE or
    UPDATE until VACUUM), and the database's size."""
    def one(sql: str):
        return pg.psql(sql, dbname=dbname)
    live, dead = one("SELECT coalesce(sum(n_live_tup), 0) || '|' || coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
                     "WHERE relname LIKE 'ducklake%'").split("|")
    return {"snapshots": int(one("SELECT count(*) FROM ducklake_snapshot")),
            "live_data_files": int(one("SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NULL")),
            "catalog_rows": int(live), "dead_row_versions": int(dead),
            "catalog_mib": round(int(one("SELECT pg_database_size(current_database())")) / 2**20, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingests", type=int, default=1000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", type=Path, help="build the store in this folder and keep it (PostgreSQL stopped)")
    ap.add_argument("--reuse", action="store_true", help="with --keep: measure the store kept there, no ingests")
    args = ap.parse_args(argv)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="cw-bench-maintain-"))
    tmp.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o755)  # the server runs as the postgres user when this runs as root
    pg = LocalPostgres(tmp / "postgres")
    try:
        pg.start()
        spec, data = pg.lake_spec("maintain"), tmp / "lake"
        ingest_s = None
        if not args.reuse:
            bundles = make_bundles(args.ingests, tmp)
            pg.create_database("maintain", fresh=True)
            store = open_store(spec, data)
            t = time.perf_counter()
            for b in bundles:
                assert ingest_paths(store, [b]).ok
            ingest_s = time.perf_counter() - t
            store.close()
        today = date.today()
        f = Filters(start=today - timedelta(days=6), end=today)
        lake = data / "lake"
        time.sleep(1.0)   # PostgreSQL's statistics reach pg_stat_user_tables within a second
        before = {"parquet_files": parquet_files(lake), "bytes": sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()),
                  "catalog": catalog_state(pg, "maintain"), "latency": page_latency(spec, data, f)}
        t = time.perf_counter()
        result = open_store(spec, data).maintain(expire_older_than_days=0)
        maintain_s = time.perf_counter() - t
        time.sleep(1.0)
        after = {"parquet_files": parquet_files(lake), "bytes": sum(p.stat().st_size for p in lake.rglob("*") if p.is_file()),
                 "catalog": catalog_state(pg, "maintain"), "latency": page_latency(spec, data, f)}
        # the same reads once more: what a second look at the pages sees, the machine's load moved meanwhile
        again = {"latency": page_latency(spec, data, f)}
        out = {"ingests": args.ingests, "ingest_s": ingest_s, "maintain_s": maintain_s, "steps": result.steps,
               "before": before, "after": after, "after_again": again, "load_average": os.getloadavg()[0]}
        print(f"{args.ingests} ingests in {ingest_s or 0:.0f} s; maintain {maintain_s:.1f} s ({', '.join(result.steps)}); "
              f"load average {out['load_average']:.1f}")
        print(f"Parquet files {before['parquet_files']:,} -> {after['parquet_files']:,}; "
              f"{before['bytes'] / 2**20:.1f} MiB -> {after['bytes'] / 2**20:.1f} MiB")
        for k in before["catalog"]:
            print(f"  catalog {k:<18} {before['catalog'][k]:>10,} -> {after['catalog'][k]:>10,}")
        print(f"  {'load average':<18} {before['latency']['load']:6.1f}   -> {after['latency']['load']:6.1f},   "
              f"again {again['latency']['load']:6.1f}")
        print(f"  {'open':<18} {before['latency']['open']:6.2f} s -> {after['latency']['open']:6.2f} s, "
              f"again {again['latency']['open']:6.2f} s")
        for name, _ in QUERIES:
            b, a, a2 = before["latency"][name], after["latency"][name], again["latency"][name]
            print(f"  {name:<18} cold {b['cold']:6.2f} s -> {a['cold']:6.2f} s, again {a2['cold']:6.2f} s   "
                  f"warm {b['warm']:6.2f} s -> {a['warm']:6.2f} s, again {a2['warm']:6.2f} s")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
    finally:
        pg.stop("fast" if args.keep else "immediate")
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
