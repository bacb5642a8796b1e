"""Fuzz every parser boundary with random mutations of real logs, bundles and archives, and report
how many inputs were tried and how many raised past the boundary (the bar: 0).

    .venv/bin/python benchmarks/fuzz_parsers.py --seconds 600          # about 10 minutes, all targets
    .venv/bin/python benchmarks/fuzz_parsers.py --seconds 60 --only bench_csv,timings --seed 7

Seeds, mutations and targets: tests/ingest/fuzz_targets.py (shared with the CI property tests).
A finding prints the target, the exception and the path of the input, saved for replay.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ingest"))
from fuzz_targets import TARGETS, mutate, seeds  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120, help="total time, shared evenly by the targets")
    ap.add_argument("--only", help="comma-separated targets (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="test-artifacts/fuzz", help="where failing inputs are saved")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(TARGETS)
    unknown = set(names) - set(TARGETS)
    if unknown:
        ap.error(f"unknown target(s): {', '.join(sorted(unknown))}; known: {', '.join(TARGETS)}")
    rng = random.Random(args.seed)
    corpus = seeds()
    out = Path(args.out)
    tried, raised = Counter(), Counter()
    per_target = args.seconds / len(names)
    print(f"{'target':<10} {'seeds':>5} {'inputs':>8} {'raised':>6}  seconds")
    for name in names:
        fn, pool = TARGETS[name], corpus[name]
        start = time.monotonic()
        while time.monotonic() - start < per_target:
            data = mutate(rng.choice(pool), rng)
            tried[name] += 1
            try:
                fn(data)
            except Exception as e:  # past the boundary: a finding
                raised[name] += 1
                out.mkdir(parents=True, exist_ok=True)
                p = out / f"{name}-{tried[name]}.bin"
                p.write_bytes(data)
                if raised[name] <= 3:
                    print(f"  {name}: {type(e).__name__}: {e} (input saved to {p})", file=sys.stderr)
                    traceback.print_exc(limit=-3, file=sys.stderr)
        print(f"{name:<10} {len(pool):>5} {tried[name]:>8,} {raised[name]:>6}  {time.monotonic() - start:.0f}")
    total, bad = sum(tried.values()), sum(raised.values())
    print(f"{'all':<10} {'':>5} {total:>8,} {bad:>6}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
