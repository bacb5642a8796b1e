"""How the ingest's progress moves on a large real log: a text log and a trace (real logs repeated
to size, benchmarks/real_inputs.py) each ingested into a fresh store with parse workers, as
`compilewatch ingest` does, recording every progress report: how many came, and the longest time
the bar stood still while bytes were parsed.

    .venv/bin/python benchmarks/bench_ingest_progress.py --mb 105 --workers 2
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_inputs  # noqa: E402

from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.store import open_store  # noqa: E402


def one(log: Path, workers: int, tmp: Path) -> dict:
    seen: list[tuple[float, int]] = []
    store = open_store(tmp / f"{log.stem}.duckdb")   # created before the clock starts
    t0 = time.perf_counter()
    report = ingest_paths(store, [log], workers=workers,
                          progress=lambda done, total, name: seen.append((time.perf_counter() - t0, done)))
    took = time.perf_counter() - t0
    assert report.ok, report.files[0].message
    size = log.stat().st_size
    first_full = next((t for t, d in seen if d >= size), took)
    # the bar's stops while bytes were being parsed (storing them comes after, and shows as done)
    times = [0.0] + [t for t, d in seen if 0 < d and t <= first_full]
    return {"mb": size / 1e6, "seconds": took, "reports": len(seen),
            "distinct_values": len({d for _, d in seen}),
            "longest_still_s": max(b - a for a, b in zip(times, times[1:])) if len(times) > 1 else took,
            "parse_done_at_s": first_full}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=105)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-progress-"))
    try:
        for kind, sources in (("text", real_inputs.text_sources()), ("trace", real_inputs.trace_sources())):
            log = tmp / ("torch_logs.txt" if kind == "text" else "trace.log")
            real_inputs.build(sources, args.mb, log)
            r = one(log, args.workers, tmp)
            print(f"{kind}: {r['mb']:.1f} MB in {r['seconds']:.1f} s, {r['reports']} progress reports "
                  f"({r['distinct_values']} distinct byte counts); while parsing, the bar stood still "
                  f"{r['longest_still_s']:.2f} s at most; all bytes parsed at {r['parse_done_at_s']:.1f} s")
            log.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
