"""How each dashboard view's render time grows with the runs in the store, and where it would be at
1,000,000 runs: the --json results of bench_pages.py on stores of several sizes, one table.

    python benchmarks/pages_growth.py 10k.json 100k.json 300k.json [--project 1000000] [--bar 1.0]

Each view's cold render time is fitted, over the two largest stores, as t = a + b * runs: what a
render pays whatever the store's size (Streamlit's script run, the store's attach, the levels'
rows, which stop growing once every model runs every month) plus what grows with the runs it reads
(the partial months' runs, one run's rows, per-run reads left). A straight line through the last
two sizes is the simplest model that the measured steps support; a view whose growth per step
speeds up (more than linear) is flagged, since the line then flatters it. The projection names the
view that would pass the bar first and the query behind most of its time at the largest store.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(path: Path) -> tuple[int, dict[str, dict]]:
    data = json.loads(path.read_text())
    return int(data["sizes"]["runs"]), {r["view"]: r for r in data["results"]}


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(a, b) of t = a + b * runs through the two largest stores' points."""
    (n1, t1), (n2, t2) = sorted(points)[-2:]
    b = (t2 - t1) / (n2 - n1) if n2 != n1 else 0.0
    return t2 - b * n2, b


def _size(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="bench_pages.py --json files, one per store size")
    ap.add_argument("--project", type=int, default=1_000_000, help="runs to project to")
    ap.add_argument("--bar", type=float, default=1.0, help="cold seconds a view should stay within")
    args = ap.parse_args(argv)
    if len(args.results) < 2:
        ap.error("give the results of at least two store sizes")
    stores = sorted((load(p) for p in args.results), key=lambda s: s[0])
    sizes = [n for n, _ in stores]
    views = [v for v in stores[-1][1] if all(v in res for _, res in stores)]
    head = ["view", *(f"{_size(n)} cold / warm" for n in sizes),
            *(f"x {_size(a)}->{_size(b)}" for a, b in zip(sizes, sizes[1:])), f"{_size(args.project)} cold (fit)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    projected = {}
    for view in views:
        rows = [res[view] for _, res in stores]
        cold = [r["cold_s"] for r in rows]
        steps = [b / a if a else float("nan") for a, b in zip(cold, cold[1:])]
        a, b = fit(list(zip(sizes, cold)))
        projected[view] = a + b * args.project
        faster = len(steps) > 1 and steps[-1] > steps[-2] * 1.2   # growth per step speeding up
        cells = [view, *(f"{r['cold_s']:.2f} / {r['warm_s']:.2f}" for r in rows), *(f"{s:.2f}" for s in steps),
                 f"{projected[view]:.2f}" + (" (growth speeding up)" if faster else "")]
        print("| " + " | ".join(cells) + " |")
    over = sorted((t, v) for v, t in projected.items() if t > args.bar)
    print()
    already = [v for v in views if stores[-1][1][v]["cold_s"] > args.bar]
    if already:
        print(f"Past {args.bar} s already at {sizes[-1]:,} runs: " + ", ".join(
            f"{v} {stores[-1][1][v]['cold_s']:.2f} s (at {sizes[0]:,}: {stores[0][1][v]['cold_s']:.2f} s)"
            for v in already) + ".")
        over = [(t, v) for t, v in over if v not in already]
    if not over:
        slowest = max(projected, key=projected.get)
        print(f"At {args.project:,} runs no other view passes {args.bar} s cold; the slowest, {slowest}, "
              f"{projected[slowest]:.2f} s.")
        return 0
    first = min(over, key=lambda tv: _crossing(stores, tv[1], args.bar))[1]
    queries = stores[-1][1][first].get("queries") or []
    top = ", ".join(f"{name} {s:.2f} s" for name, s in queries[:3])
    print(f"First past {args.bar} s: {first}, at ~{_crossing(stores, first, args.bar):,.0f} runs "
          f"({projected[first]:.2f} s at {args.project:,}); its slowest queries at {sizes[-1]:,} runs: {top}.")
    print("Past the bar at " + f"{args.project:,} runs: " + ", ".join(f"{v} {t:.2f} s" for t, v in over) + ".")
    return 0


def _crossing(stores, view: str, bar: float) -> float:
    """Runs at which the view's fitted cold time reaches the bar (inf when it does not grow)."""
    a, b = fit([(n, res[view]["cold_s"]) for n, res in stores])
    return (bar - a) / b if b > 0 else float("inf")


if __name__ == "__main__":
    sys.exit(main())
