"""Page latency at team-year scale: every dashboard page rendered through AppTest, cold and warm.

    python benchmarks/gen_team_year.py --db .bench/team_year/compilewatch.duckdb
    python benchmarks/bench_pages.py --db .bench/team_year/compilewatch.duckdb [--json out.json]
    python benchmarks/bench_pages.py --db ducklake:postgres:... --data-path DIR   # the DuckLake team store

For each page listed in app/main.py (and, for the drill-down pages, once with a selection taken
from the data: the run with the most events, two runs to compare, the top hotspot, the stormiest
function), in one process:

- cold: ``st.cache_data.clear()`` and ``st.cache_resource.clear()``, a new ``AppTest``, one run:
  what the first visitor after a restart (or after an ingest, which changes data_version) waits;
- warm: the same AppTest run again: what every later visitor waits.

The Overview's review is kept in the store once per store version (app/overview_review.py): its
cold figure is a restart's with the review kept. Each Overview view is also rendered once before
that with the kept review dropped: "first" is what the first visitor after an ingest waits, while
the review is computed (reported, not barred).

Python imports are paid once, by an untimed priming render, before the first measurement: they
are process start-up, not page latency. Every query function in app/queries is wrapped with a
timer, so a page over its bar is reported with the query that made it slow. Bars (issue: a year of
an organisation's CI, 100,000 runs): 1.0 s cold and 0.3 s warm per page on the embedded store;
1.5 s cold and 0.3 s warm on DuckLake, where a cold render also attaches the catalog again. Each
view also reports how many KB of elements it sends to the browser (> 1 MiB fails: aggregate in SQL,
never ship a million-row frame). With --baseline (the --json of a run on a smaller store, e.g. 10k
runs), a view whose cold time is more than 1.5x its baseline's fails too: a page's cost must not
grow with the events. Exit status 1 when a page fails a bar or raises.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MAIN = ROOT / "app" / "main.py"
COLD_BAR_S = 1.0
COLD_BAR_LAKE_S = 1.5
WARM_BAR_S = 0.3
GROWTH_BAR = 1.5    # cold time against the same view on the --baseline store

_current = {"label": None}
_depth = threading.local()
query_times: dict[str, list[tuple[str, float]]] = defaultdict(list)


def instrument_queries() -> list[str]:
    """Wrap every public function of app.queries.* with a timer, in place, before the app imports
    them (ui.load resolves "module:name" at call time, so the wrapper is what runs)."""
    import compilewatch.app.queries as pkg

    wrapped = []
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"compilewatch.app.queries.{info.name}")
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ != mod.__name__ or name.startswith("_") or getattr(fn, "_bench_wrapped", False):
                continue
            params = list(inspect.signature(fn).parameters)
            if not params or params[0] not in ("con", "cur", "connection"):
                continue

            def timed(*a, __fn=fn, __name=f"{info.name}.{name}", **kw):
                # only the outermost query function counts (common.df runs inside the others)
                _depth.n = getattr(_depth, "n", 0) + 1
                t = time.perf_counter()
                try:
                    return __fn(*a, **kw)
                finally:
                    _depth.n -= 1
                    if _current["label"] and _depth.n == 0:
                        query_times[_current["label"]].append((__name, time.perf_counter() - t))

            wrapper = functools.wraps(fn)(timed)
            wrapper._bench_wrapped = True
            setattr(mod, name, wrapper)
            wrapped.append(f"{info.name}.{name}")
    return wrapped


def declared_pages() -> list[str]:
    """The page scripts app/main.py declares, in its order ("views/overview.py", ...)."""
    return re.findall(r"st\.Page\(\s*[\"']([^\"']+\.py)[\"']", MAIN.read_text())


def selections(store) -> dict[str, list[tuple[str, dict]]]:
    """Extra views per page with a selection from the data, the heaviest there is."""
    with store.read() as con:
        def one(sql):
            row = con.execute(sql).fetchone()
            return row[0] if row else None

        heavy = one("SELECT run_id FROM graph_breaks GROUP BY run_id ORDER BY count(*) DESC LIMIT 1")
        other = one(f"SELECT run_id FROM runs WHERE model = (SELECT model FROM runs WHERE run_id = '{heavy}') "
                    f"AND run_id <> '{heavy}' ORDER BY started_at DESC LIMIT 1") if heavy else None
        top_break = one("SELECT break_key FROM graph_breaks GROUP BY break_key ORDER BY count(*) DESC LIMIT 1")
        storm_fn = one("SELECT function FROM recompiles GROUP BY function ORDER BY count(*) DESC LIMIT 1")
        versions = [r[0] for r in con.execute(
            "SELECT torch_version FROM runs GROUP BY torch_version ORDER BY count(*) DESC LIMIT 2").fetchall()]
        first, last = con.execute("SELECT min(started_at)::DATE, max(started_at)::DATE FROM runs").fetchone()
        heavy_model = one("SELECT r.model FROM graph_breaks g JOIN runs r USING (run_id) GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")
    out: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    if first and last:  # the whole year at once: the most rows a window can hold
        year = {"from": first.isoformat(), "to": last.isoformat()}
        for page in ("views/overview.py", "views/hotspots.py", "views/recompiles.py", "views/trends.py",
                     "views/compile_time.py"):
            out[page].append(("whole year", year))
        out["views/hotspots.py"].append(("year, search 'item()'", {**year, "q": "item()"}))
        out["views/hotspots.py"].append(("year, only new", {**year, "new": "1"}))
        if heavy_model:  # a filter interaction: one model over the year
            for page in ("views/overview.py", "views/hotspots.py", "views/recompiles.py"):
                out[page].append((f"year, model {heavy_model}", {**year, "model": heavy_model}))
    if heavy:
        out["views/run_detail.py"].append(("heaviest run", {"run": heavy}))
    if heavy and other:
        out["views/compare.py"].append(("two runs", {"run": heavy, "run_b": other}))
    if len(versions) == 2:
        out["views/compare.py"].append(("two versions", {"by": "torch_version", "a": versions[1], "b": versions[0]}))
    if top_break:
        out["views/hotspots.py"].append(("top break", {"break": top_break}))
    if storm_fn:
        out["views/recompiles.py"].append(("stormiest fn", {"fn": storm_fn}))
    return out


PAYLOAD_WARN_BYTES = 1 * 2**20


def drop_kept_reviews(store) -> None:
    """Forget the Overview's kept reviews (store/review_cache.py), as an ingest's new store version does."""
    for attempt in store.transactions(bump_version=False):
        with attempt as con:
            con.execute("DELETE FROM review_rows").fetchall()
            con.execute("DELETE FROM review_snapshots").fetchall()


def _payload_bytes(at) -> int:
    """Bytes of the elements the page sends to the browser (tables' Arrow data, chart specs and
    their data, widgets): the size that would show a million-row frame shipped to the browser."""
    total = 0

    def walk(node):
        nonlocal total
        children = node.children
        for child in (children.values() if isinstance(children, dict) else children):
            proto = getattr(child, "proto", None)
            if proto is not None and hasattr(proto, "ByteSize"):
                total += proto.ByteSize()
            if hasattr(child, "children"):
                walk(child)

    walk(at._tree)
    return total


def _problems(at) -> str:
    msgs = [str(e.value)[:160] for e in at.exception] + [str(e.value)[:160] for e in at.error]
    # a page that reads no data renders fast and proves nothing
    if any("No runs in the database yet" in str(i.value) for i in at.info):
        msgs.append("shows the empty-database message: is COMPILEWATCH_DB honoured?")
    return " | ".join(msgs)


def render(page: str, query: dict, timeout: float):
    """(cold seconds, warm seconds, payload bytes, problems) for one page view."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(MAIN), default_timeout=timeout)
    # Before its first run AppTest.switch_page finds only pages whose url_path is their file's
    # stem (others silently render the default page); after one run it finds every declared page.
    # That run is not this page's: untimed, its queries unrecorded, its caches cleared.
    label, _current["label"] = _current["label"], None
    at.run()
    _current["label"] = label
    st.cache_data.clear()
    st.cache_resource.clear()
    at.switch_page(page)
    for k, v in query.items():
        at.query_params[k] = v
    t = time.perf_counter()
    at.run()
    cold = time.perf_counter() - t
    problems = _problems(at)
    payload = _payload_bytes(at)
    label = _current["label"]
    _current["label"] = None  # warm runs hit the cache; only cold query times are of interest
    t = time.perf_counter()
    at.run()
    warm = time.perf_counter() - t
    _current["label"] = label
    return cold, warm, payload, problems or _problems(at)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # bare-mode AppTest warns on every run
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="a store built by gen_team_year.py: a database file or ducklake:postgres:...")
    ap.add_argument("--data-path", help="the DuckLake store's data path (with a ducklake: --db)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--timeout", type=float, default=120, help="per render, seconds")
    ap.add_argument("--only", help="substring of a page path: measure only those pages")
    ap.add_argument("--baseline", type=Path, help="--json of a run on a smaller store: fail views that grew past 1.5x")
    args = ap.parse_args(argv)
    from compilewatch.store import is_lake, open_store

    lake = is_lake(args.db)
    if not lake and not Path(args.db).exists():
        print(f"no database at {args.db}; build one with benchmarks/gen_team_year.py --db {args.db}", file=sys.stderr)
        return 2
    cold_bar = COLD_BAR_LAKE_S if lake else COLD_BAR_S
    os.environ["COMPILEWATCH_DB"] = args.db if lake else str(Path(args.db).resolve())
    if args.data_path:
        os.environ["COMPILEWATCH_DATA_PATH"] = str(Path(args.data_path).resolve())
    os.environ["COMPILEWATCH_BOOTSTRAP"] = "0"
    os.chdir(ROOT)
    store = open_store(os.environ["COMPILEWATCH_DB"], os.environ.get("COMPILEWATCH_DATA_PATH"))
    baseline = {}
    if args.baseline:
        baseline = {r["view"]: r["cold_s"] for r in json.loads(args.baseline.read_text())["results"] if r.get("cold_s")}
    wrapped = instrument_queries()
    pages = declared_pages()
    extra = selections(store)
    views = []
    for page in pages:
        if args.only and args.only not in page:
            continue
        views.append((page, "default", {}))
        views += [(page, label, q) for label, q in extra.get(page, [])]

    with store.read() as con:
        sizes = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "graph_breaks", "recompiles", "guard_failures")}
    store.close()
    print(f"{store.backend} store {args.db}: " + ", ".join(f"{t} {n:,}" for t, n in sizes.items()))
    print(f"{len(wrapped)} query functions timed; bars: cold <= {cold_bar} s, warm <= {WARM_BAR_S} s")

    existing = [p for p, _, _ in views if (MAIN.parent / p).exists()]
    if existing:  # priming: imports and the first AppTest cost, not page latency
        render(existing[0], {}, args.timeout)

    results = []
    for page, label, query in views:
        name = page.removeprefix("views/").removesuffix(".py") + ("" if label == "default" else f" [{label}]")
        if not (MAIN.parent / page).exists():
            results.append(dict(view=name, page=page, query=query, status="MISSING", cold_s=None, warm_s=None, problems="page file not written yet"))
            continue
        first = None
        if page == "views/overview.py":   # the first visitor after an ingest: the review is computed
            drop_kept_reviews(store)
            try:
                first = render(page, query, args.timeout)[0]
            except Exception:
                pass   # the measured render below reports what went wrong
        _current["label"] = name
        try:
            cold, warm, payload, problems = render(page, query, args.timeout)
        except Exception as e:  # a render that times out or crashes AppTest itself
            results.append(dict(view=name, page=page, query=query, status="ERROR", cold_s=None, warm_s=None, problems=f"{type(e).__name__}: {e}"[:300]))
            continue
        finally:
            _current["label"] = None
        if payload > PAYLOAD_WARN_BYTES:
            problems = (problems + " | " if problems else "") + f"sends {payload / 2**20:.1f} MiB to the browser"
        base = baseline.get(name)
        if base and cold > GROWTH_BAR * max(base, 0.05):
            problems = (problems + " | " if problems else "") + f"cold {cold / base:.1f}x its baseline's {base:.2f} s"
        ok = cold <= cold_bar and warm <= WARM_BAR_S and not problems
        results.append(dict(view=name, page=page, query=query, status="PASS" if ok else "FAIL",
                            cold_s=round(cold, 3), warm_s=round(warm, 3), payload_kb=round(payload / 1024),
                            first_s=None if first is None else round(first, 3), baseline_cold_s=base,
                            problems=problems,
                            queries=sorted(query_times.get(name, []), key=lambda x: -x[1])))

    width = max([len(r["view"]) for r in results] + [4])
    print()
    print(f"{'page':<{width}}  {'cold s':>7} {'':4}  {'warm s':>7} {'':4}  {'sent KB':>7}  {'first s':>7}  result")
    for r in results:
        if r["cold_s"] is None:
            print(f"{r['view']:<{width}}  {'-':>7} {'':4}  {'-':>7} {'':4}  {'-':>7}  {'-':>7}  {r['status']}: {r['problems']}")
            continue
        c_ok = "ok" if r["cold_s"] <= cold_bar else "SLOW"
        w_ok = "ok" if r["warm_s"] <= WARM_BAR_S else "SLOW"
        first = "-" if r["first_s"] is None else f"{r['first_s']:.2f}"
        print(f"{r['view']:<{width}}  {r['cold_s']:7.2f} {c_ok:4}  {r['warm_s']:7.2f} {w_ok:4}  {r['payload_kb']:7,}  {first:>7}  "
              f"{r['status']}" + (f": {r['problems']}" if r["problems"] else ""))
    print()
    print("slowest queries per view (cold):")
    for r in results:
        qs = r.get("queries") or []
        if qs:
            print(f"  {r['view']}: " + ", ".join(f"{n} {s:.2f}s" for n, s in qs[:4]))
    n_pass = sum(r["status"] == "PASS" for r in results)
    print(f"\n{n_pass}/{len(results)} views PASS")
    if args.json:
        args.json.write_text(json.dumps(dict(db=str(args.db), backend=store.backend, sizes=sizes, results=results),
                                        indent=2, default=str))
    return 0 if n_pass == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
