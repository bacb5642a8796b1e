"""`compilewatch`: a thin shell over the library. Library errors become one sentence and a hint."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from .errors import CompileWatchError

DB_ENV = "COMPILEWATCH_DB"


def _default_db() -> str:
    from .store import DEFAULT_DB
    return os.environ.get(DB_ENV) or DEFAULT_DB


class _ProgressBar:
    """One line on stderr, redrawn at most 10 times a second; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.last = 0.0
        self.t0 = time.monotonic()

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        mb = done / 1e6
        rate = mb / max(now - self.t0, 1e-6)
        sys.stderr.write(f"\r[{bar:<30}] {frac:6.1%} {mb:8.1f} MB {rate:6.1f} MB/s {name[-40:]:<40}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*(str(x) for x in r)) for r in rows]
    return "\n".join(out)


def cmd_ingest(args) -> int:
    from .loader import ingest_paths
    from .store import Store
    store = Store.open(args.db)
    bar = _ProgressBar(sys.stderr.isatty() and not args.quiet)
    report = ingest_paths(store, args.paths, model=args.model, label=args.label, torch_version=args.torch_version,
                          strict=args.strict, progress=bar, run_id=args.run_id)
    rows = []
    for f in report.files:
        recs = ", ".join(f"{k}={v}" for k, v in sorted(f.records.items())) or "-"
        rows.append([f.name[-60:], f.kind, f.status, recs, f.errors, f.message[:80]])
    print(_table(rows, ["file", "kind", "status", "records", "errors", "note"]))
    print(f"\n{report.count('stored') + report.count('partial')} stored, {report.count('duplicate')} duplicate, "
          f"{report.count('failed')} failed, {report.errors} unparsable line(s) kept in ingest_errors -> {store.db_path}")
    if not report.ok:
        return 1
    if args.strict and report.errors:
        return 1
    return 0


def cmd_summarize(args) -> int:
    from .summary import summarize
    summary = summarize(args.paths)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=False))
    else:
        for k in ("files", "torch_version", "graph_breaks", "unique_graph_breaks", "recompiles", "limit_hits",
                  "compile_ids", "failures", "errors"):
            print(f"{k:>20}: {summary[k]}")
        if summary["recompiled_functions"]:
            print(f"{'recompiled':>20}: " + ", ".join(f"{k} x{v}" for k, v in summary["recompiled_functions"].items()))
        if summary["guard_failures"]:
            print(f"{'guard failures':>20}: " + ", ".join(f"{k} x{v}" for k, v in summary["guard_failures"].items()))
    return 1 if (args.strict and summary["errors"]) else 0


def cmd_check(args) -> int:
    from .summary import summarize
    s = summarize(args.paths)
    problems = []
    limits = [("graph_breaks", args.max_graph_breaks, "graph breaks"), ("recompiles", args.max_recompiles, "recompiles"),
              ("limit_hits", args.max_limit_hits, "recompile-limit hits"), ("failures", args.max_failures, "failed compiles"),
              ("errors", args.max_errors, "unparsable lines")]
    for key, limit, words in limits:
        if limit is not None and s[key] > limit:
            problems.append(f"{s[key]} {words} > allowed {limit}")
    if problems:
        print("compilewatch check FAILED: " + "; ".join(problems))
        if s["recompiled_functions"]:
            print("  most recompiled: " + ", ".join(f"{k} x{v}" for k, v in list(s["recompiled_functions"].items())[:5]))
        if s["guard_failures"]:
            print("  guard failures: " + ", ".join(f"{k} x{v}" for k, v in s["guard_failures"].items()))
        return 1
    print(f"compilewatch check passed: {s['graph_breaks']} graph breaks, {s['recompiles']} recompiles, "
          f"{s['limit_hits']} limit hits in {s['files']} file(s)")
    return 0


def cmd_reingest(args) -> int:
    from .reingest import reingest
    from .store import Store
    store = Store.open(args.db)
    n = reingest(store, all_files=args.all)
    print(f"re-parsed {n} file(s) from {store.raw_dir}")
    return 0


def cmd_inbox(args) -> int:
    from .inbox import process_once, watch
    from .store import Store
    store = Store.open(args.db)
    store.inbox_dir.mkdir(exist_ok=True)

    def show(name, report):
        print(f"{name}: {report.count('stored') + report.count('partial')} stored, {report.count('duplicate')} duplicate, "
              f"{report.count('failed')} failed", flush=True)
    if args.watch:
        print(f"watching {store.inbox_dir} every {args.interval:g} s (Ctrl-C stops)", flush=True)
        watch(store, args.interval, show)
        return 0
    results = process_once(store)
    for name, report in results:
        show(name, report)
    if not results:
        print(f"nothing waiting in {store.inbox_dir}")
    return 0 if all(r.ok for _, r in results) else 1


def cmd_dashboard(args) -> int:
    import subprocess
    from pathlib import Path
    app = Path(__file__).resolve().parent.parent / "app" / "main.py"
    env = dict(os.environ, **{DB_ENV: args.db})
    return subprocess.call([sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port)], env=env)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compilewatch", description="torch.compile graph breaks, recompiles and speedups across runs")
    sub = p.add_subparsers(dest="command", required=True)

    i = sub.add_parser("ingest", help="parse logs, bundles, folders and archives into the DuckDB store")
    i.add_argument("paths", nargs="+")
    i.add_argument("--db", default=_default_db(), help=f"database file (env {DB_ENV}; default %(default)s)")
    i.add_argument("--model", help="model name for files that don't say")
    i.add_argument("--label", help="label (code version, experiment) for files that don't say")
    i.add_argument("--torch-version", help="torch version for files that don't say")
    i.add_argument("--run-id", help="put all loose files into this one run (e.g. the ranks of one job)")
    i.add_argument("--strict", action="store_true", help="any unparsable line fails the file (nothing of it is stored) and the exit status")
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=cmd_ingest)

    s = sub.add_parser("summarize", help="parse without storing and print the counts")
    s.add_argument("paths", nargs="+")
    s.add_argument("--json", action="store_true", help="one JSON object on stdout")
    s.add_argument("--strict", action="store_true", help="exit 1 when any line could not be parsed")
    s.set_defaults(func=cmd_summarize)

    c = sub.add_parser("check", help="exit 1 when graph breaks / recompiles exceed limits (a CI gate)")
    c.add_argument("paths", nargs="+")
    c.add_argument("--max-graph-breaks", type=int)
    c.add_argument("--max-recompiles", type=int)
    c.add_argument("--max-limit-hits", type=int)
    c.add_argument("--max-failures", type=int)
    c.add_argument("--max-errors", type=int)
    c.set_defaults(func=cmd_check)

    r = sub.add_parser("reingest", help="re-parse stored raw files with this version's parsers")
    r.add_argument("--db", default=_default_db())
    r.add_argument("--all", action="store_true", help="every file, not only those parsed by an older parser version")
    r.set_defaults(func=cmd_reingest)

    ib = sub.add_parser("inbox", help="ingest the bundles collectors dropped into <store>/inbox/")
    ib.add_argument("--db", default=_default_db())
    ib.add_argument("--watch", action="store_true", help="keep watching instead of one pass")
    ib.add_argument("--interval", type=float, default=5.0, help="seconds between passes with --watch")
    ib.set_defaults(func=cmd_inbox)

    d = sub.add_parser("dashboard", help="start the Streamlit dashboard on this database")
    d.add_argument("--db", default=_default_db())
    d.add_argument("--port", type=int, default=8501)
    d.set_defaults(func=cmd_dashboard)

    # The collector registers `collect` and `bench` when it is installed. Looked up by name, not
    # imported, so ingest keeps no dependency on it (import-linter contract in pyproject.toml).
    try:
        collectors_cli = importlib.import_module("collectors.cli")
    except ImportError:
        collectors_cli = None
    if collectors_cli is not None:
        collectors_cli.add_subcommands(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CompileWatchError as e:
        print(f"compilewatch: {e.title}", file=sys.stderr)
        if e.hint:
            print(f"  hint: {e.hint}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `compilewatch summarize --json | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("compilewatch: interrupted; files ingested so far are stored, the one in progress is not", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
