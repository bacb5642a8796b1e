"""`compilewatch`: the whole product's command line, a thin shell over the library.

Library errors become one sentence and a hint, exit status 2. A command is one function plus its
registration::

    @command("report", "write the weekly report", db_arg(), arg("--out", help="..."))
    def report(args) -> int:
        from compilewatch.review.report import write_report
        ...
        return 0

A name with a space ("store copy") is a subcommand of a group ("store"), created on first use.
Handlers import what they need inside, so `compilewatch --help` stays fast and imports no torch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from compilewatch.cli.output import IngestProgress, console, render, safe, safe_block, say, table
from compilewatch.core import settings
from compilewatch.core.errors import CompileWatchError


# -- registry ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OneOf:
    """Arguments of which at most one may be given (an argparse mutually exclusive group)."""
    args: tuple[tuple[tuple, dict], ...]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    args: tuple[tuple[tuple, dict] | OneOf, ...]
    func: Callable[[argparse.Namespace], int]
    description: str | None = None


COMMANDS: list[Command] = []


def arg(*names: str, **kwargs) -> tuple[tuple, dict]:
    """One argparse argument, as `add_argument(*names, **kwargs)` would take it."""
    return names, kwargs


def one_of(*args: tuple[tuple, dict]) -> OneOf:
    """`arg(...)`s of which a command line may give at most one."""
    return OneOf(args)


def command(name: str, help: str, *args: tuple[tuple, dict], description: str | None = None):
    """Register the decorated `func(args) -> exit status` as `compilewatch NAME`."""
    def register(func: Callable[[argparse.Namespace], int]):
        COMMANDS.append(Command(name, help, tuple(args), func, description))
        return func
    return register


def db_arg() -> tuple[tuple, dict]:
    """--db, defaulting to the db setting at run time (so the environment is read when it runs)."""
    s = settings.BY_NAME["db"]
    return arg("--db", default=None, help=f"database file, or ducklake:postgres:<libpq connection string> for a "
                                          f"team store (env {s.env}; default {s.default})")


def data_path_arg() -> tuple[tuple, dict]:
    """--data-path, given to every command that takes --db: where a DuckLake store keeps its files."""
    s = settings.BY_NAME["data_path"]
    return arg("--data-path", default=None, metavar="DIR",
               help=f"with --db ducklake:postgres:...: the shared folder, or s3://BUCKET/PREFIX, for its Parquet data, "
                    f"raw/ and inbox/ (env {s.env})")


# -- output helpers ----------------------------------------------------------------------------
def require_paths(paths) -> None:
    """A path that is not there is bad input: refuse before doing anything (exit 2, naming it)."""
    from compilewatch.ingest.units import missing, missing_error

    gone = missing(paths)
    if gone:
        raise missing_error(gone)


def refused(bad: list[str]) -> int:
    """Inputs named on the command line that are not logs: say which and why; exit status 2."""
    for line in bad:
        say(f"compilewatch: refused {safe(line)}", err=True)
    return 2


def _table(rows: list[list], headers: list[str]) -> str:
    """A table as text (rich), every cell made safe: log content never reaches the terminal raw."""
    return render(table(headers, rows))


# -- commands ------------------------------------------------------------------------------------
@command("ingest", "parse logs, bundles, folders and archives into the DuckDB store",
         arg("paths", nargs="+"),
         db_arg(),
         arg("--model", help="model name for files that don't say"),
         arg("--label", help="label (code version, experiment) for files that don't say"),
         arg("--torch-version", help="torch version for files that don't say"),
         arg("--run-id", help="put all loose files into this one run (e.g. the ranks of one job)"),
         arg("--strict", action="store_true",
             help="any unparsable line fails the file (nothing of it is stored) and the exit status"),
         arg("--quiet", action="store_true", help="no progress bar"),
         arg("--workers", type=int, metavar="N",
             help="parse processes for many files, or for one large text log parsed in ranges "
                  "(default: one per core; 1 parses in this process, as do files holding under 8 MB "
                  "to parse, where a process's start costs more than it saves)"))
def cmd_ingest(args) -> int:
    from compilewatch.core.errors import InputError
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.ingest.workers import default_workers
    from compilewatch.store import open_store
    from compilewatch.store.lean import pandas_kept_out

    require_paths(args.paths)
    if args.workers is not None and args.workers < 1:
        raise InputError("--workers must be 1 or more", "leave it out for one parse process per core")
    with pandas_kept_out(), IngestProgress(sys.stderr.isatty() and not args.quiet) as bar:
        store = open_store(args.db)
        report = ingest_paths(store, args.paths, model=args.model, label=args.label,
                              torch_version=args.torch_version, strict=args.strict, progress=bar, run_id=args.run_id,
                              workers=args.workers or default_workers())
    rows = [[f.name, f.kind, f.status, ", ".join(f"{k}={v}" for k, v in sorted(f.records.items())) or "-",
             f.errors, f.retries, f.message] for f in report.files]
    print(render(table(["file", "kind", "status", "records", "errors", "retries", "note"], rows,
                       wrap=("file", "records", "note"))))
    skipped = f"{report.count('skipped')} skipped (not logs), " if report.count("skipped") else ""
    # a commit that lost a race with another host's ran again (a team store with many writers)
    retried = f", {report.retries} commit(s) retried after a conflict" if report.retries else ""
    print(f"\n{report.count('stored') + report.count('partial')} stored, {report.count('duplicate')} duplicate, "
          f"{skipped}{report.count('failed')} failed, {report.errors} unparsable line(s) kept in ingest_errors "
          f"-> {store.db_path}{retried}")
    if report.count("stored") + report.count("partial"):
        keep_review_current(store, detached=True)
    if report.bad_input:
        return refused([f"{f.name}: {f.message}" for f in report.bad_input])
    if not report.ok:
        return 1
    if args.strict and report.errors:
        return 1
    return 0


def keep_review_current(store, detached: bool) -> None:
    """After runs were stored: the Overview's kept review brought current (app/review_refresh.py), in a
    process of its own for a command that ends now, else in a thread. Never fails the command."""
    from compilewatch.app import review_refresh

    try:
        if detached:
            review_refresh.refresh_detached(store)
        else:
            review_refresh.refresh_in_background(store)
    except (OSError, RuntimeError) as e:   # not started: the next visit computes the review, as before
        print(f"compilewatch: the Overview's review is left to its next visit ({safe(str(e))})", file=sys.stderr)


@command("summarize", "parse without storing and print the counts",
         arg("paths", nargs="+"),
         arg("--json", action="store_true", help="one JSON object on stdout"),
         arg("--strict", action="store_true", help="exit 1 when any line could not be parsed"))
def cmd_summarize(args) -> int:
    from compilewatch.ingest.summary import summarize

    require_paths(args.paths)
    summary = summarize(args.paths)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=False))
    else:
        for k in ("files", "torch_version", "graph_breaks", "unique_graph_breaks", "recompiles", "limit_hits",
                  "compile_ids", "failures", "errors"):
            print(f"{k:>20}: {safe(summary[k])}")
        if summary["recompiled_functions"]:
            print(f"{'recompiled':>20}: " + ", ".join(f"{safe(k)} x{v}" for k, v in summary["recompiled_functions"].items()))
        if summary["guard_failures"]:
            print(f"{'guard failures':>20}: " + ", ".join(f"{safe(k)} x{v}" for k, v in summary["guard_failures"].items()))
    if summary["bad_input"]:
        return refused(summary["bad_input"])
    return 1 if (args.strict and summary["errors"]) else 0


def _print_cudagraphs(figures: dict) -> None:
    """A dry check's CUDA-graph coverage over the paths given, and each skip with torch's reason."""
    from compilewatch.review.cudagraph_coverage import describe, from_summary

    print(f"  CUDA graphs: {safe(describe(from_summary(figures)))}")
    for s in figures["skip_reasons"]:
        where = f" at {s['where']}" if s["where"] else ""
        print(f"    skipped due to {safe(s['reason'])}{safe(where)} (x{s['count']})")
    if figures["skips_counted_by_torch"] > figures["skips"]:
        print(f"    torch counted {figures['skips_counted_by_torch']} skip(s) the log gives no reason for "
              "(a log collected without TORCH_LOGS=cudagraphs, or a graph on the CPU)")


SPEC_HELP = ("KEY=VALUE, repeatable or comma-separated; KEY: label, torch, commit, run, hardware, model "
             "(same key twice: either value; different keys: both)")


@command("check", "a CI gate: exit 1 when the candidate got worse than the baseline, or exceeds absolute limits",
         arg("paths", nargs="*", help="logs or bundles: with --baseline they are ingested and are the candidate; "
                                     "alone they are checked against the --max-* limits without storing"),
         db_arg(),
         arg("--baseline", action="append", metavar="SPEC", help=f"the baseline runs: {SPEC_HELP}"),
         arg("--candidate", action="append", metavar="SPEC", help="the candidate runs (SPEC as --baseline)"),
         arg("--since", default="7d", help="window for a side given by no SPEC (default %(default)s)"),
         arg("--json", action="store_true", help="one JSON object on stdout with a `regressions` list"),
         arg("--max-graph-breaks", type=int, help="most graph breaks allowed"),
         arg("--max-recompiles", type=int, help="most recompiles allowed"),
         arg("--max-limit-hits", type=int, help="most recompile-limit hits allowed"),
         arg("--max-failures", type=int, help="most failed compiles allowed"),
         arg("--max-errors", type=int, help="most unparsable lines allowed"))
def cmd_check(args) -> int:
    from compilewatch.core.errors import InputError

    limits = [("graph_breaks", args.max_graph_breaks, "graph breaks"), ("recompiles", args.max_recompiles, "recompiles"),
              ("limit_hits", args.max_limit_hits, "recompile-limit hits"), ("failures", args.max_failures, "failed compiles"),
              ("errors", args.max_errors, "unparsable lines")]
    compare = bool(args.baseline or args.candidate)
    # No SPEC and no paths: the weekly review's default sides, as `report` takes them (the last
    # --since against the span before it, or each model's newest version against the one before).
    weekly = not args.paths and not compare
    require_paths(args.paths)
    problems: list[str] = []
    summary = None
    if args.paths and (any(limit is not None for _, limit, _ in limits) or not compare):
        from compilewatch.ingest.summary import summarize

        summary = summarize(args.paths)
        if summary["bad_input"]:   # a gate that passes on a file it could not read would pass on anything
            return refused(summary["bad_input"])
        for key, limit, words in limits:
            if limit is not None and summary[key] > limit:
                problems.append(f"{summary[key]} {words} > allowed {limit}")
    result = None
    if compare or weekly:
        from compilewatch.review.gate import run_review
        from compilewatch.store import open_store

        result = run_review(open_store(args.db), args.baseline, args.candidate, args.since,
                            candidate_paths=args.paths or None, require_sides=compare)
        if weekly and result.candidate_runs.empty:
            raise InputError(f"nothing to check: the store has no runs in the last {args.since}",
                             "ingest the week's runs first, give --since a longer span, or name the sides "
                             "with --baseline SPEC --candidate SPEC")
    failed = bool(problems) or bool(result and result.regressions)
    coverage = []
    if result is not None:
        from compilewatch.review.cudagraph_coverage import by_model
        from compilewatch.store import open_store

        with open_store(args.db).read() as con:
            coverage = by_model(con, result.baseline_runs, result.candidate_runs)
    if args.json:
        out = result.to_json() if result else {"regressions": []}
        out["cudagraph_coverage"] = coverage
        out["limits"] = {"exceeded": problems, "summary": summary}
        out["status"] = "failed" if failed else "passed"
        print(json.dumps(out, indent=2, default=str))
        return 1 if failed else 0
    if problems:
        print("compilewatch check FAILED: " + "; ".join(problems))
        if summary["recompiled_functions"]:
            print("  most recompiled: " + ", ".join(f"{safe(k)} x{v}" for k, v in list(summary["recompiled_functions"].items())[:5]))
        if summary["guard_failures"]:
            print("  guard failures: " + ", ".join(f"{safe(k)} x{v}" for k, v in summary["guard_failures"].items()))
    elif summary is not None:
        print(f"compilewatch check: limits passed: {summary['graph_breaks']} graph breaks, {summary['recompiles']} "
              f"recompiles, {summary['limit_hits']} limit hits in {summary['files']} file(s)")
    if summary is not None and summary.get("cudagraphs"):
        _print_cudagraphs(summary["cudagraphs"])
    if result is not None:
        from compilewatch.review.gate import closing_line, verdict_lines

        for line in verdict_lines(result, coverage) + [closing_line(result, failed)]:
            print(safe(line))
    return 1 if failed else 0


@command("report", "write the weekly review (what got worse or better, since when, and why) as HTML or Markdown",
         db_arg(),
         arg("--since", default="7d", help="the candidate window up to the newest run, and the baseline "
                                           "window before it, when no SPEC names them (default %(default)s)"),
         arg("--baseline", action="append", metavar="SPEC", help=f"the baseline runs: {SPEC_HELP}"),
         arg("--candidate", action="append", metavar="SPEC", help="the candidate runs (SPEC as --baseline)"),
         arg("--out", help="the report file: FILE.html (self-contained, charts inline) or FILE.md"),
         arg("--post", metavar="URL", help="also send the Markdown report to this webhook (Slack, Mattermost, or a "
                                           "GitHub issue-comment proxy): a JSON body with 'text' and 'body'"))
def cmd_report(args) -> int:
    from pathlib import Path

    from compilewatch.core.errors import SpecError
    from compilewatch.review import report
    from compilewatch.review.gate import run_review
    from compilewatch.store import open_store

    if not args.out and not args.post:
        raise SpecError("nowhere to put the report", "give --out FILE.html|FILE.md, --post URL, or both")
    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".html", ".htm", ".md", ".markdown"):
        raise SpecError(f"cannot tell the report format from '{args.out}'", "name the file *.html or *.md")
    if out is not None and not out.parent.exists():
        raise SpecError(f"no folder {out.parent} for the report", "create it or write the report elsewhere")
    store = open_store(args.db)
    result = run_review(store, args.baseline, args.candidate, args.since)
    if out is not None:
        out.write_text(report.render(result, out.name), encoding="utf-8")
    if args.post:
        from compilewatch.review.post import post_markdown

        sent = post_markdown(args.post, report.to_markdown(result))
        print(f"posted the report to {safe(args.post)} (HTTP {sent.status}, {sent.attempts} tr{'y' if sent.attempts == 1 else 'ies'})")
    print(f"{out or 'report'}: {len(result.regressions)} regression(s), {len(result.suspicious)} suspicious, "
          f"{len(result.improvements)} improvement(s), {len(result.changepoints)} change point(s) · "
          f"candidate {result.candidate} ({len(result.candidate_runs)} runs), "
          f"baseline {result.baseline} ({len(result.baseline_runs)} runs)")
    return 0


@command("reingest", "re-parse stored raw files with this version's parsers",
         db_arg(),
         arg("--all", action="store_true", help="every file, not only those parsed by an older parser version"))
def cmd_reingest(args) -> int:
    from compilewatch.ingest.reingest import reingest
    from compilewatch.store import open_store

    store = open_store(args.db)
    n = reingest(store, all_files=args.all)
    print(f"re-parsed {n} file(s) from {store.raw_dir}")
    return 0


@command("inbox", "ingest the bundles collectors dropped into <store>/inbox/",
         db_arg(),
         arg("--watch", action="store_true", help="keep watching instead of one pass"),
         arg("--interval", type=float, default=5.0, help="seconds between passes with --watch (default %(default)s)"))
def cmd_inbox(args) -> int:
    from compilewatch.ingest.inbox import process_once, watch
    from compilewatch.store import open_store

    store = open_store(args.db)

    def show(name, report):
        print(f"{safe(name)}: {report.count('stored') + report.count('partial')} stored, {report.count('duplicate')} duplicate, "
              f"{report.count('failed')} failed", flush=True)

    def after_pass(results):
        # once the pass has let its held writes go: the worker goes on to the next pass meanwhile
        if any(r.count("stored") + r.count("partial") for _, r in results):
            keep_review_current(store, detached=False)
    if args.watch:
        from compilewatch.core.signals import stop_on_signals

        with stop_on_signals() as stop:
            try:
                # said once the handlers are in: a signal sent on reading this line is handled, never the default's
                print(f"watching {store.inbox_dir} every {args.interval:g} s (Ctrl-C or SIGTERM stops)", flush=True)
                watch(store, args.interval, show, stop=stop.event, after_pass=after_pass)
            except KeyboardInterrupt:   # mid-entry: its ingest rolled back, the entry back in the inbox
                pass
        print(f"stopped ({stop.name or 'interrupted'})", flush=True)
        return 0
    results = process_once(store)
    for name, report in results:
        show(name, report)
    if any(r.count("stored") + r.count("partial") for _, r in results):
        keep_review_current(store, detached=True)
    if not results:
        print(f"nothing waiting in {store.inbox_dir}")
    return 0 if all(r.ok for _, r in results) else 1


@command("stats", "what the store holds: rows per table, runs per model/hardware/torch version, size, schema",
         db_arg(),
         arg("--json", action="store_true", help="one JSON object: every table's name with its row count, and the rest"),
         arg("--top", type=int, default=10, help="rows of each runs-per-... list (default %(default)s)"))
def cmd_stats(args) -> int:
    from compilewatch.store import open_store
    from compilewatch.store.stats import store_stats

    stats = store_stats(open_store(args.db), top=args.top)
    if args.json:
        print(json.dumps(stats, indent=2, default=str))
        return 0
    size = stats["size_on_disk"]
    print(f"{stats['backend']} store {stats['db']}  (schema version {stats['schema_version']}, "
          f"{_bytes(size['total_bytes'])} on disk: " + ", ".join(f"{k.removesuffix('_bytes')} {_bytes(v)}"
                                                                for k, v in size.items() if k != "total_bytes" and v is not None) + ")")
    if stats["migrations_pending"]:
        print(f"pending migrations: {', '.join(stats['migrations_pending'])}")
    tables = [t for t in stats if isinstance(stats[t], int) and t != "schema_version"]
    print()
    print(_table([[t, f"{stats[t]:,}"] for t in tables], ["table", "rows"]))
    for key, title in (("runs_by_model", "model"), ("runs_by_hardware", "hardware"), ("runs_by_torch_version", "torch")):
        print()
        print(_table([[r["value"], f"{r['runs']:,}"] for r in stats[key]], [title, "runs"]))
    return 0


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


@command("store copy", "copy every row of one store into another, empty one (embedded <-> DuckLake), verified by counts",
         arg("--from", dest="src", required=True, metavar="DB", help="the store to read: a database file or ducklake:postgres:..."),
         arg("--to", dest="dst", required=True, metavar="DB", help="the empty store to fill: a database file or ducklake:postgres:..."),
         arg("--from-data-path", metavar="DIR", help="data path of a DuckLake --from (default: the data_path setting)"),
         arg("--to-data-path", metavar="DIR", help="data path of a DuckLake --to (default: the data_path setting)"))
def cmd_store_copy(args) -> int:
    from compilewatch.store import open_store
    from compilewatch.store.copy import copy_store

    src = open_store(args.src, args.from_data_path)
    dst = open_store(args.dst, args.to_data_path)
    result = copy_store(src, dst)
    print(_table([[t, f"{a:,}", f"{b:,}", "ok" if a == b else "DIFFERS"] for t, (a, b) in result["tables"].items()],
                 ["table", "from", "to", "check"]))
    print(f"\ncopied {sum(a for a, _ in result['tables'].values()):,} rows in {len(result['tables'])} tables "
          f"and {result['raw_files_copied']} raw file(s): {src.db_path} -> {dst.db_path}")
    return 0


@command("store maintain", "keep a store fast: refresh runs a killed ingest left stale, merge DuckLake's small files, expire old snapshots, delete unreferenced files",
         db_arg(),
         arg("--expire-older-than", type=float, default=7.0, metavar="DAYS",
             help="DuckLake snapshots older than this are expired (time travel stops there; default %(default)s)"),
         arg("--json", action="store_true", help="one JSON object: files and bytes before and after, steps run"))
def cmd_store_maintain(args) -> int:
    from compilewatch.store import open_store

    result = open_store(args.db, args.data_path).maintain(args.expire_older_than)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    print(f"{result.backend}: {', '.join(result.steps)}; data files {result.data_files_before:,} -> "
          f"{result.data_files_after:,}, {_bytes(result.bytes_before)} -> {_bytes(result.bytes_after)}; "
          f"{result.orphaned_raw_deleted:,} orphaned raw file(s) deleted")
    return 0


@command("dashboard", "start the Streamlit dashboard on this database, with the push API and inbox workers beside it",
         db_arg(),
         arg("--port", type=int, default=8501, help="port to serve on (default %(default)s)"),
         arg("--address", default=None, help="address to listen on (env COMPILEWATCH_LISTEN_ADDRESS; default "
                                            "127.0.0.1: this machine only; 0.0.0.0 for every interface)"),
         arg("--inbox-workers", type=int, default=1, metavar="N",
             help="`inbox --watch` workers started beside the dashboard, which ingest what `compilewatch push` "
                  "sends (default %(default)s; 0 where other hosts run them)"),
         description="Serve the dashboard's pages and, on the same port, the push API (/api/push) that "
                     "`compilewatch push` sends runs to; start --inbox-workers inbox workers that ingest them. "
                     "SIGINT or SIGTERM stops all of it within seconds.")
def cmd_dashboard(args) -> int:
    import subprocess

    from compilewatch.app import server
    from compilewatch.core.errors import InputError
    from compilewatch.core.signals import stop_on_signals

    if args.inbox_workers < 0:
        raise InputError("--inbox-workers must be 0 or more", "0 starts no inbox worker here")
    env = dict(os.environ, **{settings.BY_NAME["db"].env: args.db})
    address = args.address or settings.get("listen_address")
    dashboard = [sys.executable, "-m", "streamlit", "run", str(server.ASGI), "--server.port", str(args.port),
                 *server.streamlit_flags({"server.address": address})]
    worker = [sys.executable, "-m", "compilewatch", "inbox", "--watch", "--interval", str(INBOX_POLL_S)]
    with stop_on_signals(grace_s=STOP_GRACE_S + 5) as stop:
        procs = []
        try:
            procs.append(subprocess.Popen(dashboard, env=env))
            procs += [subprocess.Popen(worker, env=env) for _ in range(args.inbox_workers)]
            while procs[0].poll() is None:
                for i, p in enumerate(procs[1:], 1):
                    if p.poll() is not None:   # a worker that died is replaced: pushes wait on it
                        print(f"compilewatch: inbox worker {p.pid} ended ({p.returncode}); starting another",
                              file=sys.stderr, flush=True)
                        procs[i] = subprocess.Popen(worker, env=env)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            _stop_all(procs)
    if stop.signum is not None:
        print(f"compilewatch: dashboard stopped ({stop.name})", file=sys.stderr)
        return 0
    return procs[0].returncode if procs else 1


# How often the dashboard's inbox workers look for pushes, and how long a child may take to stop.
INBOX_POLL_S = 0.5
STOP_GRACE_S = 10.0


def _stop_all(procs) -> None:
    """SIGTERM to every child still running, then SIGKILL to those not gone after STOP_GRACE_S."""
    import signal as signals

    for p in procs:
        if p.poll() is None:
            p.send_signal(signals.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except Exception:   # noqa: BLE001 - past the grace: no more waiting
            p.kill()
            p.wait()


@command("token add", "make a push token for a team or user (shown once; the store keeps its salted hash)",
         arg("name", help="the team or user the token is for, e.g. ci-llm or alice"),
         db_arg())
def cmd_token_add(args) -> int:
    from compilewatch.store import open_store, tokens

    token, secret = tokens.add(open_store(args.db), args.name)
    print(f"push token {token.token_id} for {safe(token.name)} (shown once; keep it as a CI secret):")
    print(secret)
    print("use it with: COMPILEWATCH_PUSH_TOKEN=<token> compilewatch push BUNDLE... --server URL")
    return 0


@command("token list", "the push tokens of this store: id, who for, made, revoked",
         db_arg(),
         arg("--json", action="store_true", help="one JSON list on stdout"))
def cmd_token_list(args) -> int:
    from compilewatch.store import open_store, tokens

    found = tokens.listed(open_store(args.db))
    if args.json:
        print(json.dumps([t.__dict__ for t in found], indent=2, default=str))
        return 0
    if not found:
        print("no push tokens yet: `compilewatch token add NAME` makes one")
        return 0
    print(_table([[t.token_id, t.name, f"{t.created_at:%Y-%m-%d %H:%M}",
                   f"{t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "-"] for t in found],
                 ["token", "for", "made (UTC)", "revoked (UTC)"]))
    return 0


@command("token revoke", "end a push token: the server refuses it from then on",
         arg("token", help="the token's id, as `token list` shows it (or the whole token)"),
         db_arg())
def cmd_token_revoke(args) -> int:
    from compilewatch.store import open_store, tokens

    token = tokens.revoke(open_store(args.db), args.token)
    print(f"push token {token.token_id} ({safe(token.name)}) revoked at {token.revoked_at:%Y-%m-%d %H:%M} UTC")
    return 0


@command("push", "send bundles and logs to the team server over HTTP; with --wait --check, a CI gate with no database",
         arg("paths", nargs="+", metavar="BUNDLE_OR_DIR", help="bundles (folders or archives), logs, or folders of them"),
         arg("--server", help="the team server's URL, e.g. http://compilewatch.internal:8501 (env COMPILEWATCH_SERVER)"),
         arg("--token-file", metavar="FILE", help="read the push token from FILE (else env COMPILEWATCH_PUSH_TOKEN; "
                                                  "never on the command line)"),
         arg("--wait", action="store_true", help="block until the server has stored the runs, and print them"),
         arg("--check", action="store_true", help="then judge the pushed runs against --baseline and exit 1 on a "
                                                  "regression (implies --wait)"),
         arg("--baseline", action="append", metavar="SPEC", help=f"with --check, the baseline runs: {SPEC_HELP}"),
         arg("--timeout", type=float, default=600.0, metavar="S", help="most seconds --wait waits (default %(default)s)"),
         arg("--json", action="store_true", help="one JSON object on stdout: the push's receipt (and the check)"),
         description="Pack the bundles and logs into one .tar.gz and POST it to the team server's /api/push with "
                     "the push token; the server queues it in its store's inbox, where its inbox workers ingest it. "
                     "Prints the push's id; with --wait its runs (each with a link to its page), duplicates and "
                     "failures. Exit status: 0, 1 when a file failed or (--check) something got worse, 2 when the "
                     "push was refused (the reason is printed).")
def cmd_push(args) -> int:
    import tempfile
    from pathlib import Path

    from compilewatch.cli import push as client
    from compilewatch.core.errors import InputError

    require_paths(args.paths)
    if args.check and not args.baseline:
        raise InputError("--check needs --baseline SPEC", "e.g. --check --baseline label=main")
    url = args.server or settings.get("push_server")
    if not url:
        raise InputError("no team server: give --server URL or set COMPILEWATCH_SERVER",
                         "the URL `compilewatch dashboard` serves at, e.g. http://compilewatch.internal:8501")
    server = client.Server(url, client.token_from(args.token_file, settings.get("push_token")))
    with tempfile.TemporaryDirectory(prefix="compilewatch-push-") as tmp:
        packed = Path(tmp) / "push.tar.gz"
        files = client.pack(args.paths, packed)
        size = packed.stat().st_size
        answer = server.push(packed, files)
    push_id = answer["push"]
    out = {"push": answer}
    say_ = (lambda *a, **k: None) if args.json else print
    say_(f"push {push_id}: {files} file(s), {size / 2**20:,.1f} MiB, " +
         (f"the same bytes as an earlier push ({answer['state']})" if answer.get("duplicate_push") else "queued"))
    if not (args.wait or args.check):
        if args.json:
            print(json.dumps(out, indent=2))
        return 0
    receipt = answer if answer.get("state") == "settled" else server.wait(push_id, args.timeout)
    out["push"] = receipt
    for run in receipt["runs"]:
        say_(f"  run {safe(run['run_id'])}: {run['stored']} file(s) stored, {run['duplicate']} duplicate  {safe(run['url'])}")
    for d in receipt["duplicates"]:
        say_(f"  duplicate: {safe(d['file'])} (already stored in run {safe(d['run_id'])})")
    for f in receipt["failures"]:
        say_(f"  FAILED: {safe(f['file'])}: {safe(f['message'])}")
    say_(f"{receipt['stored']} file(s) stored, {len(receipt['duplicates'])} duplicate, {len(receipt['failures'])} failed")
    status = 1 if receipt["failures"] else 0
    if args.check:
        runs = [r["run_id"] for r in receipt["runs"]]
        if not runs:
            raise InputError("nothing to check: the push stored no run", "push bundles or torch.compile logs")
        verdict = server.check(runs, args.baseline)
        out["check"] = verdict["review"]
        for line in verdict["lines"]:
            say_(safe(line))
        status = max(status, 1 if verdict["status"] == "failed" else 0)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    return status


@command("ranks", "a run's ranks side by side, and the ranks that diverged",
         arg("run", nargs="?", help="run id (without it: list the runs that have several ranks)"),
         db_arg(),
         arg("--json", action="store_true", help="one JSON object on stdout"),
         arg("--fail-on-divergence", action="store_true", help="exit 1 when the ranks diverge (a CI gate)"),
         description="Per rank: compile ids, graphs, cache hits and misses, recompiles, graph breaks, compile time. "
                     "Ranks whose compile ids, graph count, cache hits/misses, recompiles or graph breaks differ "
                     "from the reference group are flagged with the difference (as tlparse --all-ranks-html).")
def cmd_ranks(args) -> int:
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import ranks
    from compilewatch.core.errors import InputError
    from compilewatch.store import open_store

    store = open_store(args.db)
    with store.read() as con:
        if not args.run:
            runs = ranks.multi_rank_runs(con, Filters(limit=50))
            if args.json:
                print(runs.to_json(orient="records", date_format="iso"))
            else:
                print(_table([[r.run_id, r.model or "-", r.label or "-", r.torch_version or "-", r.ranks]
                              for r in runs.itertuples()], ["run", "model", "label", "torch", "ranks"])
                      if not runs.empty else "no run in this store has more than one rank")
            return 0
        f = Filters(run_id=args.run)
        if not ranks.run_exists(con, f):
            raise InputError(f"no run {args.run!r} in {store.db_path}",
                             "`compilewatch ranks` without a run lists the runs that have several ranks")
        per = ranks.per_rank(con, f)
        div = ranks.divergence_from(per)
    if args.json:
        print(json.dumps({"run_id": args.run,
                          "ranks": json.loads(per.to_json(orient="records")),
                          "divergence": div.to_dict(orient="records")}, indent=2))
    else:
        print(_table([["?" if r.rank != r.rank else int(r.rank), r.compiles, r.graphs, r.recompiles, r.graph_breaks,
                       r.cache_hits, r.cache_misses, f"{r.compile_time_s or 0:.2f}", ", ".join(r.compile_ids)]
                      for r in per.itertuples()],
                     ["rank", "compiles", "graphs", "recompiles", "graph breaks", "cache hits", "cache misses",
                      "compile s", "compile ids"]))
        print()
        if len(per) < 2:
            print("one rank (or none) in this run: nothing to compare")
        elif div.empty:
            print(f"all {len(per)} ranks agree on {ranks.compared()}")
        else:
            print(f"RANKS DIVERGE ({len(div)} difference(s)):")
            for d in div.itertuples():
                print(f"  {d.aspect}: rank(s) {d.ranks} vs {d.reference_ranks}: {d.difference}")
    return 1 if (args.fail_on_divergence and not div.empty) else 0


@command("compile-time", "frames that cost the most compile time across runs, and in which phase",
         db_arg(),
         arg("--model", action="append", default=[], help="only these models (repeatable)"),
         arg("--torch-version", action="append", default=[], help="only these torch versions (repeatable)"),
         arg("--search", help="only frames whose function or file contains this"),
         arg("--limit", type=int, default=20, help="rows (default %(default)s)"),
         arg("--json", action="store_true", help="one JSON object on stdout"))
def cmd_compile_time(args) -> int:
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import compile_time
    from compilewatch.store import open_store

    f = Filters(models=tuple(args.model), torch_versions=tuple(args.torch_version), search=args.search,
                limit=args.limit)
    with open_store(args.db).read() as con:
        frames = compile_time.frame_hotspots(con, f)
        linkage = compile_time.runtime_linkage(con, f)
    if args.json:
        print(json.dumps({"frames": json.loads(frames.to_json(orient="records")),
                          "runtime_linkage": json.loads(linkage.to_json(orient="records"))}, indent=2))
        return 0
    print(_table([[r.co_name, r.code, f"{r.total_s:.1f}", f"{r.share_pct or 0:.1f}%", r.dominant or "-",
                   f"{r.forward_s:.1f}", f"{r.tracing_s:.1f}", f"{r.aot_s:.1f}", f"{r.inductor_s:.1f}",
                   f"{r.autotune_s:.1f}", f"{r.backward_s:.1f}", f"{r.runtime_autotune_s:.1f}",
                   r.compiles, r.recompiles, r.cache_misses, r.runs, r.torch_versions or "-"]
                  for r in frames.itertuples()],
                 ["function", "frame", "compile s", "share", "dominant", "forward", "tracing", "AOT", "Inductor",
                  "autotune", "backward", "runtime autotune", "compiles", "recompiles", "cache misses", "runs",
                  "torch"]))
    print()

    def num(v, fmt):
        return "-" if v != v or v is None else format(v, fmt)
    print(_table([[r.model or "-", r.callable, r.torch_version or "-", r.runs, r.calls, num(r.steady_ms, ".3f"),
                   num(r.compile_cost_ms, ".0f"), num(r.eager_ms, ".3f"), num(r.break_even_steps, ".0f")]
                  for r in linkage.itertuples()],
                 ["model", "callable", "torch", "runs", "timed calls", "steady ms", "compile cost ms", "eager ms",
                  "break-even steps"]))


@command("show", "a run's compile ids, subgraphs and stack trie; one compile id's metrics, failures and artifacts",
         arg("run", help="run id"),
         arg("compile_id", nargs="?",
             help="compile id as tlparse prints it without brackets, e.g. 0/1 or !0/1/0; '-' for records without one"),
         arg("--artifact", metavar="KIND_OR_NAME",
             help="print that artifact's payload (e.g. dynamo_output_graph, inductor_output_code, fx_graph_cache_miss)"),
         arg("--rank", type=int, help="only this rank's compile (multi-rank runs)"),
         db_arg())
def cmd_show(args) -> int:
    from compilewatch.deepdive import show
    from compilewatch.store import open_store

    with open_store(args.db).read() as con:
        if args.artifact:
            text = show.artifact_text(con, args.run, args.compile_id, args.artifact, rank=args.rank)
        elif args.compile_id:   # listings name what the log named (subgraphs, artifacts): shown safely
            text = safe_block(show.compile_text(con, args.run, args.compile_id, rank=args.rank))
        else:
            text = safe_block(show.run_text(con, args.run))
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


@command("diff", "what the compiler did differently between two runs: graphs, guards, kernels, compile time",
         arg("baseline", help="a run id (or its prefix), or a SPEC such as label=v1 (its newest run)"),
         arg("candidate", help="a run id (or its prefix), or a SPEC such as label=v2 (its newest run on the "
                               "baseline run's model and hardware)"),
         arg("--rank", type=int, help="compare this rank (multi-rank runs; default: rank 0)"),
         arg("--show", metavar="KIND", help="also print the unified diff of this artifact for each changed pair: "
                                             "dynamo_output_graph, aot_forward_graph, aot_backward_graph, "
                                             "inductor_output_code"),
         arg("--json", action="store_true", help="one JSON object: subgraphs, pairs, only_baseline, only_candidate, "
                                                 "cache_misses, cache_summary"),
         db_arg())
def cmd_diff(args) -> int:
    from compilewatch.deepdive import diff
    from compilewatch.review import cache_miss
    from compilewatch.store import open_store

    with open_store(args.db).read() as con:
        base = _resolve_run(con, args.baseline)
        cand = _resolve_run(con, args.candidate, like=base)
        d = diff.diff_runs(con, base, cand, rank=args.rank)
        misses = cache_miss.why_missed(con, base, cand, rank=args.rank)
        if args.json:
            print(json.dumps({**d.to_json(), "cache_misses": [m.to_json() for m in misses],
                              "cache_summary": cache_miss.summary(misses)}, indent=2, default=str))
            return 0
        text = diff.describe(d) + "\n\n" + cache_miss.describe(misses)
        if args.show:
            for p in d.pairs:
                if any(k.split("#")[0] == args.show for k in p.graphs_changed):
                    text += "\n\n" + diff.text_diff(con, base, cand, p.baseline_id, p.candidate_id, args.show, args.rank)
    print(safe_block(text))
    return 0


def _resolve_run(con, text: str, like: str | None = None) -> str:
    """A run id, its unique prefix, or the newest run a SPEC selects (on `like`'s model and hardware)."""
    from compilewatch.core.errors import NotFoundError
    from compilewatch.review.baseline import parse_spec, spec_where
    from compilewatch.review.series import select_runs

    if "=" in text:
        where, params = spec_where(parse_spec(text))
        if like is not None:
            where += " AND rv.model = (SELECT model FROM rv WHERE run_id = ?) AND rv.hardware = (SELECT hardware FROM rv WHERE run_id = ?)"
            params += [like, like]
        runs = select_runs(con, where, params)
        if runs.empty:
            raise NotFoundError(f"{text} selects no run" + (" on the baseline run's model and hardware" if like else ""),
                                "list what the store holds with `compilewatch stats` or the dashboard")
        return str(runs["run_id"].iloc[-1])
    found = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [text]).fetchall()]
    if len(found) != 1:
        raise NotFoundError(f"{'no run' if not found else 'more than one run'} starts with {text!r}",
                            "give more of the run id, or a SPEC such as label=v2")
    return found[0]


@command("export-trace", "a run's compile phases and step times as Chrome trace JSON (open it in Perfetto)",
         arg("run", help="run id"),
         arg("--out", required=True, help="file to write, e.g. run.trace.json ('-' for stdout)"),
         db_arg())
def cmd_export_trace(args) -> int:
    from compilewatch.deepdive import perfetto
    from compilewatch.store import open_store

    with open_store(args.db).read() as con:
        trace = perfetto.chrome_trace(con, args.run)
    data = perfetto.to_json(trace)
    if args.out == "-":
        sys.stdout.buffer.write(data)
    else:
        with open(args.out, "wb") as f:
            f.write(data)
        other = trace["otherData"]
        print(f"wrote {args.out}: {other['compile_phases']} compile phase(s), {other['steps']} step(s); "
              f"open it at https://ui.perfetto.dev")
    return 0


# -- the collector: run a job, or a benchmark, and write bundles -------------------------------------
def _logs_default() -> str:
    from compilewatch.collectors.torch_logs import DEFAULT_LOGS

    return ",".join(DEFAULT_LOGS)   # the same components, as the --logs flag spells them


def _collector_failed(e: CompileWatchError) -> int:
    # One line, title and hint together: the job's own output shares this stderr.
    print(f"compilewatch: error: {e}", file=sys.stderr)
    return 2


@command("collect", "run a command under TORCH_LOGS/TORCH_TRACE and timing hooks, write a bundle",
         arg("--model", help="model name recorded in the manifest"),
         arg("--label", help="free label recorded in the manifest (branch, experiment, ...)"),
         arg("--out", default=".compilewatch/bundles", help="folder the bundle goes in (default: %(default)s)"),
         arg("--logs", default=_logs_default(), help="TORCH_LOGS components (default: %(default)s)"),
         arg("--timeout", type=float, default=None, metavar="S",
             help="stop CMD after S seconds (SIGTERM, then SIGKILL); the bundle says end_reason=timeout"),
         arg("--archive", action="store_true", help="write <bundle>.tar.gz instead of a folder"),
         arg("--no-hooks", action="store_true", help="don't inject the timing hooks (logs and trace only)"),
         arg("--no-probe", action="store_true",
             help="don't time the host probe before and after CMD (env COMPILEWATCH_HOST_PROBE=0)"),
         arg("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS..."),
         description="Run CMD with TORCH_LOGS and TORCH_TRACE pointed into a new bundle, timing every "
                     "torch.compile'd callable, and write the bundle however CMD ends. Exits with CMD's status.")
def cmd_collect(args) -> int:
    from compilewatch.collectors.collect import collect

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        print("compilewatch collect: error: give the command to run after --, e.g. "
              "`compilewatch collect -- python train.py`", file=sys.stderr)
        return 2
    try:
        result = collect(command, args.out, model=args.model, label=args.label, logs=args.logs,
                         timeout=args.timeout, archive=args.archive, hooks=not args.no_hooks,
                         probe=False if args.no_probe else None)
    except CompileWatchError as e:
        return _collector_failed(e)
    print(f"compilewatch: {result.end_reason} (exit status {result.exit_status}); bundle: {result.bundle}",
          file=sys.stderr)
    return result.exit_status


@command("bench", "eager vs torch.compile on built-in models: speedup, compile latency, memory, graph breaks",
         arg("--models", default="mlp", help="comma-separated built-in models (--list-models)"),
         arg("--modes", default="default", help="comma-separated torch.compile modes (default: %(default)s)"),
         one_of(arg("--train", action="store_true", help="time training steps (forward, backward, SGD step); the default"),
                arg("--infer", action="store_true", help="time inference (forward under no_grad)")),
         arg("--steps", type=int, default=20, help="steady-state steps timed (default: %(default)s)"),
         arg("--warmup", type=int, default=3, help="steps run after the first and not timed (default: %(default)s)"),
         arg("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available"),
         arg("--batch-size", type=int, default=None, help="default: each model's own"),
         arg("--amp", action="store_true", help="bf16 autocast (CUDA only), as PyTorch's dashboard runs training"),
         arg("--repeats", type=int, default=1, help="run each model and mode N times, for run-to-run spread"),
         arg("--timeout", type=float, default=None, metavar="S", help="per model and mode"),
         arg("--out", default=".compilewatch/bench", help="folder for bundles and bench.csv (default: %(default)s)"),
         arg("--logs", default=_logs_default(), help="TORCH_LOGS components (default: %(default)s)"),
         arg("--archive", action="store_true", help="write each bundle as .tar.gz"),
         arg("--skip-missing", action="store_true",
             help="skip models whose package (torchvision, timm, transformers) is not installed"),
         arg("--list-models", action="store_true", help="list the built-in models and exit"),
         description="For each model and mode, run eager and compiled on the same batches (warm-up excluded) "
                     "in a collected child process; one bundle per model and mode, plus <out>/bench.csv with "
                     "PyTorch benchmarks/dynamo columns.")
def cmd_bench(args) -> int:
    from compilewatch.collectors.models import describe_models

    if args.list_models:
        print(describe_models())
        return 0
    from compilewatch.collectors.bench import run_bench

    try:
        rows = run_bench(
            models=[m for m in args.models.split(",") if m.strip()],
            modes=[m for m in args.modes.split(",") if m.strip()],
            task="infer" if args.infer else "train",
            steps=args.steps, warmup=args.warmup, device=args.device, out_dir=args.out,
            batch_size=args.batch_size, amp=args.amp, repeats=args.repeats, timeout=args.timeout,
            archive=args.archive, logs=args.logs, skip_missing=args.skip_missing,
        )
    except CompileWatchError as e:
        return _collector_failed(e)
    return 0 if rows and all(r.get("exit_status", 0) == 0 for r in rows) else 1


# -- parser and entry point ----------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compilewatch",
                                description="torch.compile graph breaks, recompiles and speedups across runs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for c in COMMANDS:
        *group, name = c.name.split()
        target = sub
        if group:
            if group[0] not in groups:
                g = sub.add_parser(group[0], help=f"{group[0]} commands")
                groups[group[0]] = g.add_subparsers(dest=f"{group[0]}_command", required=True, metavar="COMMAND")
            target = groups[group[0]]
        cp = target.add_parser(name, help=c.help, description=c.description or c.help)
        for a in c.args:
            if isinstance(a, OneOf):
                group = cp.add_mutually_exclusive_group()
                for names, kwargs in a.args:
                    group.add_argument(*names, **kwargs)
            else:
                cp.add_argument(*a[0], **a[1])
        if db_arg()[0] in (a[0] for a in c.args if not isinstance(a, OneOf)):
            cp.add_argument(*data_path_arg()[0], **data_path_arg()[1])
        cp.set_defaults(func=c.func)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "db", "") is None:
        args.db = settings.get("db")
    if getattr(args, "data_path", None):
        # Through the environment, as --db reaches the dashboard: every store opened here and in the
        # processes this one starts sees it.
        # An s3://bucket/prefix is passed on as it is.
        from compilewatch.store.objects import is_s3
        os.environ[settings.BY_NAME["data_path"].env] = (
            args.data_path if is_s3(args.data_path) else os.path.abspath(args.data_path))
    try:
        return args.func(args)
    except CompileWatchError as e:
        print(f"compilewatch: {safe(e.title)}", file=sys.stderr)   # titles may quote a file name
        if e.hint:
            print(f"  hint: {safe(e.hint)}", file=sys.stderr)
        return 2
    except settings.SettingError as e:
        print(f"compilewatch: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `compilewatch summarize --json | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("compilewatch: interrupted; files ingested so far are stored, the one in progress is not", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
