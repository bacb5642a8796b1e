"""TORCH_LOGS text parsing speed and memory: >= 50 MB/s, memory flat in file size.

    .venv/bin/python benchmarks/bench_text_parse.py            # 100 MB and 200 MB
    .venv/bin/python benchmarks/bench_text_parse.py --mb 300

Builds files by repeating the real fixtures in tests/fixtures/text/ (all of them, in turn) up
to the size asked, then runs ``parse_text`` over each file in a fresh subprocess with a sink
that only counts (what the loader does before batching into DuckDB), and prints MB/s and the
child's peak RSS. Two sizes are run so that memory growth with file size would show. Each size
is parsed ``--repeat`` times (fresh process each) and the fastest wall time is reported with the
median and the CPU-time rate beside it: the machine is shared, and other people's load only
ever makes a run slower.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "text"

CHILD = r"""
import json, resource, sys, time
from compilewatch.ingest.text import parse_text
from compilewatch.ingest.records import CountingSink

path = sys.argv[1]
sink = CountingSink()
t0 = time.perf_counter()
c0 = time.process_time()
with open(path, "rb", buffering=1 << 20) as fh:
    parse_text(fh, sink)
dt = time.perf_counter() - t0
cpu = time.process_time() - c0
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "rows": sink.rows, "errors": sink.errors,
                  "peak_rss_mb": rss_kb / 1024}))
"""


def build(path: Path, target_bytes: int) -> int:
    blobs = [p.read_bytes() for p in sorted(FIXTURES.glob("*.log"))]
    blobs = [b if b.endswith(b"\n") else b + b"\n" for b in blobs]
    written = 0
    with open(path, "wb") as out:
        while written < target_bytes:
            for b in blobs:
                out.write(b)
                written += len(b)
    return written


def run(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                         env=env, cwd=REPO, check=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, nargs="*", default=[100, 200], help="file sizes to build (MB)")
    ap.add_argument("--repeat", type=int, default=3, help="parses per size (best is reported)")
    ap.add_argument("--keep", action="store_true", help="keep the built files")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cw_text_bench_"))
    results = []
    try:
        for mb in args.mb:
            path = tmp / f"torch_logs_{mb}mb.log"
            size = build(path, mb * 1024 * 1024)
            runs = sorted((run(path) for _ in range(max(1, args.repeat))), key=lambda x: x["seconds"])
            r = runs[0]
            med = runs[len(runs) // 2]["seconds"]
            mbs = size / 1e6 / r["seconds"]
            results.append((mb, size, r))
            print(f"{size / 1e6:8.1f} MB  best {r['seconds']:5.2f} s = {mbs:6.1f} MB/s  "
                  f"(median {size / 1e6 / med:5.1f} MB/s, CPU-time {size / 1e6 / r['cpu_seconds']:5.1f} MB/s)  "
                  f"peak RSS {max(x['peak_rss_mb'] for x in runs):6.1f} MB  "
                  f"rows {sum(r['rows'].values())} {json.dumps(r['rows'], sort_keys=True)}  errors {r['errors']}")
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep:
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()
    ok = all(size / 1e6 / r["seconds"] >= 50 for _, size, r in results)
    if len(results) > 1:
        growth = results[-1][2]["peak_rss_mb"] - results[0][2]["peak_rss_mb"]
        print(f"peak RSS growth from {results[0][0]} MB to {results[-1][0]} MB: {growth:+.1f} MB")
    print("PASS: >= 50 MB/s" if ok else "FAIL: below 50 MB/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
