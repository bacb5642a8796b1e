"""What keeping every cache lookup's key components costs, and how long explaining a miss takes.

    python benchmarks/bench_cache_keys.py [PATHS ...] [--repeat 3]

Ingests PATHS (default: sample_logs/, every real bundle) twice into fresh embedded stores: once as
shipped, once with the cache_events parser's component rows dropped on their way to the sink (the
ingest as it was before the components were kept). Prints, best of --repeat, the process CPU
seconds of each ingest (a figure that moves less with a shared machine's load than wall time) and
wall seconds, the rows each leaves, the store's bytes in use and the component table's share of
them, the component rows per lookup, and the CPU and wall seconds of review.cache_miss.why_missed for the pair of runs of one model with the most
lookups (the rerun against the run before it).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.ingest.trace.parsers import cache_events  # noqa: E402
from compilewatch.review.cache_miss import why_missed  # noqa: E402
from compilewatch.store import open_store  # noqa: E402


class _NoComponents:
    """A sink that passes on everything but the key components."""

    def __init__(self, sink):
        self._sink = sink

    def row(self, table, row):
        if table != "cache_key_components":
            self._sink.row(table, row)

    def __getattr__(self, name):
        return getattr(self._sink, name)


class _Ctx:
    def __init__(self, ctx):
        self._ctx, self.sink = ctx, _NoComponents(ctx.sink)

    def __getattr__(self, name):
        return getattr(self._ctx, name)


def _ingest(paths: list[Path], folder: Path, keep: bool) -> tuple[float, float, Path]:
    real = cache_events.parse
    if not keep:
        cache_events.parse = lambda env, ctx: real(env, _Ctx(ctx))
    try:
        db = folder / "cw.duckdb"
        store = open_store(db)
        cpu, wall = time.process_time(), time.perf_counter()
        report = ingest_paths(store, paths)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
        return cpu, wall, db
    finally:
        cache_events.parse = real


def _size(con) -> tuple[int, int]:
    """The store's used bytes (its blocks in use: a file's size also counts free blocks and depends
    on when it was last checkpointed) and the bytes of the component table's blocks."""
    _, _, block, _, used, *_ = con.execute("PRAGMA database_size").fetchone()
    comps = con.execute("SELECT count(DISTINCT block_id) FROM pragma_storage_info('cache_key_components') "
                        "WHERE block_id >= 0").fetchone()[0]
    return used * block, comps * block


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="*", type=Path, default=[ROOT / "sample_logs"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; inputs: {', '.join(str(p) for p in args.paths)}")
    best = {}
    for keep in (False, True):
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                cpu, wall, db = _ingest(args.paths, Path(tmp), keep)
                with open_store(db).read() as con:
                    size = _size(con)
                    events = con.execute("SELECT count(*) FROM cache_events").fetchone()[0]
                    comps = con.execute("SELECT count(*) FROM cache_key_components").fetchone()[0]
                    pair = con.execute("""
                        WITH n AS (SELECT e.run_id, r.model, count(*) AS lookups, min(r.started_at) AS t
                                   FROM cache_events e JOIN runs r USING (run_id) GROUP BY ALL)
                        SELECT a.run_id, b.run_id FROM n a JOIN n b ON a.model = b.model AND a.t < b.t
                        ORDER BY a.lookups + b.lookups DESC LIMIT 1""").fetchone()
                    explain = None
                    if keep and pair:
                        c0, w0 = time.process_time(), time.perf_counter()
                        misses = why_missed(con, *pair)
                        explain = (time.process_time() - c0, time.perf_counter() - w0, len(misses))
            old = best.get(keep)
            if old is None or cpu < old[0]:
                best[keep] = (cpu, wall, size, events, comps, explain)
    for keep, label in ((False, "without components"), (True, "with components   ")):
        cpu, wall, size, events, comps, _ = best[keep]
        print(f"ingest {label}: {cpu:6.2f} s CPU, {wall:6.2f} s wall; store {size[0] / 1e6:6.1f} MB in use, "
              f"the components' table {size[1] / 1e6:.1f} MB; {events:,} lookups, {comps:,} component rows")
    (c0, w0, s0, _, _, _), (c1, w1, s1, events, comps, explain) = best[False], best[True]
    print(f"components: +{100 * (c1 / c0 - 1):.0f}% ingest CPU, the table {100 * s1[1] / s1[0]:.0f}% of the "
          f"store, {comps / max(events, 1):.0f} rows a lookup")
    if explain:
        print(f"why_missed on the busiest pair of runs: {explain[0]:.3f} s CPU, {explain[1]:.3f} s wall, "
              f"{explain[2]} miss(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
