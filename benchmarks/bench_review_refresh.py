"""The Overview's first visit after an ingest, with and without the writer keeping its review current
(app/review_refresh.py).

    python benchmarks/gen_team_year.py --db .bench/ty10k/compilewatch.duckdb --runs 10000
    python benchmarks/bench_review_refresh.py --db .bench/ty10k/compilewatch.duckdb [--rounds 2]

On a copy of --db (left unchanged), each round ingests one real bundle of sample_logs/ with
`compilewatch ingest`, then reads the Overview's review of its default view as the page does
(app/overview_review.py: overview). Without: COMPILEWATCH_REVIEW_REFRESH=0, so that visit computes
the review. With: the ingest's own refresher keeps it; the visit comes once it is kept (the time
until then is printed: a visitor earlier than that computes it, as without). Printed per round: the
ingest command's wall time, the time until the review was kept, and the first visit's read.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.app import overview_review, review_refresh  # noqa: E402
from compilewatch.store import open_store, review_cache  # noqa: E402

BUNDLES = sorted((ROOT / "sample_logs").glob("cpu-*/*.tar.gz"))
KEPT_WAIT_S = 600


def ingest(db: Path, bundle: Path, refresh: bool) -> float:
    env = {**os.environ, "COMPILEWATCH_REVIEW_REFRESH": "1" if refresh else "0"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "compilewatch", "ingest", str(bundle), "--db", str(db), "--quiet"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def kept_now(store) -> bool:
    with store.read() as con:
        f = review_refresh.default_view(con)
        return review_cache.is_kept(con, overview_review.view_key(f), review_cache.store_version(con))


def first_visit(store) -> tuple[float, bool]:
    """The page's read of the review (seconds) and whether it was computed rather than read."""
    was_kept = kept_now(store)
    with store.read() as con:
        f = review_refresh.default_view(con)
    t = time.perf_counter()
    overview_review.overview(store, f)
    return time.perf_counter() - t, not was_kept


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path, help="a store built by gen_team_year.py (left unchanged)")
    ap.add_argument("--rounds", type=int, default=2, help="ingests measured each way")
    args = ap.parse_args(argv)
    if len(BUNDLES) < 2 * args.rounds:
        raise SystemExit(f"{len(BUNDLES)} sample bundles, {2 * args.rounds} needed")
    work = Path(tempfile.mkdtemp(prefix="refresh-", dir=args.db.parent.parent))
    try:
        db = work / args.db.name
        shutil.copy(args.db, db)
        store = open_store(db)
        with store.read() as con:
            runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
        print(f"{runs:,} runs; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        bundles = iter(BUNDLES)
        figures = {False: [], True: []}
        for r in range(args.rounds):
            for refresh in (False, True):
                ingest_s = ingest(db, next(bundles), refresh)
                t, kept_after = time.perf_counter(), None
                if refresh:
                    while not kept_now(store) and time.perf_counter() - t < KEPT_WAIT_S:
                        time.sleep(0.1)
                    kept_after = time.perf_counter() - t
                visit, computed = first_visit(store)
                figures[refresh].append(visit)
                print(f"  round {r + 1} {'with   ' if refresh else 'without'}: ingest {ingest_s:5.2f} s, "
                      + (f"review kept {kept_after:5.2f} s after it, " if refresh else "")
                      + f"first visit {visit:6.3f} s ({'computed' if computed else 'read the kept review'})",
                      flush=True)
        for refresh in (False, True):
            print(f"first visit after an ingest, {'with' if refresh else 'without'} the refresh: "
                  f"median {statistics.median(figures[refresh]):.3f} s over {len(figures[refresh])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
