"""Upload of a >= 100 MB TORCH_TRACE through the dashboard against `compilewatch ingest` of the
same file, each into a fresh store, in one run. Bar (issue 4): the app within 2x the CLI.

    python benchmarks/bench_upload.py [--size-mb 105] [--via browser,apptest] [--repeat 3]

The file is real: the public tlparse TORCH_TRACE logs (../shared/public_logs/tlparse/)
concatenated, in a temp dir, until it passes --size-mb. Measured:

- cli:     `compilewatch ingest --db fresh.duckdb FILE` as a subprocess, start to exit;
- browser: the real server (`streamlit run app/main.py`) in headless Chromium: from handing the
           file to the upload page's file uploader (it travels over HTTP to the server) to the
           result table, clicking Ingest once the upload is in;
- apptest: the upload page under streamlit.testing's AppTest: file_uploader.upload(...) then
           the Ingest button, to the result (no HTTP: the page's own code path only).

Each app path must store exactly what the CLI stored (row counts per table are compared).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "app"))
PUBLIC_LOGS = ROOT.parent / "shared" / "public_logs" / "tlparse"
RATIO_BAR = 2.0
TABLES = ("runs", "files", "compiles", "graph_breaks", "recompiles", "guard_failures", "limit_hits",
          "compile_phases", "cache_events", "ingest_errors")


def build_trace(dest: Path, size_mb: float) -> Path:
    """Concatenate the public tlparse logs (each ending in a newline) until size_mb is passed."""
    logs = sorted(PUBLIC_LOGS.glob("*.log"))
    if not logs:
        raise SystemExit(f"no public tlparse logs in {PUBLIC_LOGS}; they make the benchmark's trace")
    path = dest / "dedicated_log_torch_trace_rank_0_bench.log"
    written = 0
    with open(path, "wb") as out:
        while written < size_mb * 2**20:
            for log in logs:
                data = log.read_bytes()
                if not data.endswith(b"\n"):
                    data += b"\n"
                out.write(data)
                written += len(data)
    return path


def counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def fresh_db(work: Path, name: str) -> Path:
    from compilewatch.store import open_store

    db = work / name / "compilewatch.duckdb"
    shutil.rmtree(db.parent, ignore_errors=True)
    open_store(db)
    return db


def via_cli(trace: Path, work: Path) -> tuple[float, Path]:
    db = work / "cli" / "compilewatch.duckdb"
    shutil.rmtree(db.parent, ignore_errors=True)
    exe = Path(sys.executable).parent / "compilewatch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "compilewatch"]
    t = time.perf_counter()
    # with its progress bar, as a person runs it (the upload page shows one too)
    proc = subprocess.run(cmd + ["ingest", "--db", str(db), str(trace)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - t
    # exit 1 also means "some lines unparsable" (stored as partial): what was stored decides
    if not db.exists() or counts(db)["files"] < 1:
        raise RuntimeError(f"compilewatch ingest stored nothing (exit {proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    return seconds, db


def via_browser(trace: Path, work: Path) -> tuple[float, Path]:
    from browser_support import chromium_page, dashboard_server, missing_browser, upload_files, wait_for_app_idle

    reason = missing_browser()
    if reason:
        raise RuntimeError(f"browser path unavailable: {reason}")
    db = fresh_db(work, "browser")
    with dashboard_server(db, log_path=work / "server.log") as base, chromium_page(timeout_ms=600_000) as page:
        page.goto(base + "/upload")
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.wait_for(state="attached")
        wait_for_app_idle(page)
        # page-side clock marks: when the progress bar first moves, when it says Done, the result
        page.evaluate("""() => { const m = window.__cw = {};
            new MutationObserver(() => { const txt = document.body.innerText, now = performance.now();
                if (!m.progress && /MiB/.test(txt)) m.progress = now;
                if (!m.done && /\\bDone\\b/.test(txt)) m.done = now;
                if (!m.result && /\\d+ stored · \\d+ partial/.test(txt)) m.result = now;
            }).observe(document.body, {subtree: true, childList: true, characterData: true}); }""")
        t = time.perf_counter()
        upload_files(page, [trace])
        page.wait_for_function(
            "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith('Ingest') && !b.disabled)",
            timeout=600_000)
        uploaded = time.perf_counter() - t
        click = page.evaluate("() => performance.now()")
        page.get_by_role("button", name="Ingest").click()
        page.get_by_text(re.compile(r"\d+ stored · \d+ partial")).first.wait_for(timeout=1_200_000)
        seconds = time.perf_counter() - t
        marks = page.evaluate("() => window.__cw")
        page.screenshot(path=str(work / "upload_result.png"), full_page=True)
    phases = ", ".join(f"{k} +{(v - click) / 1000:.1f}" for k, v in marks.items())
    print(f"  browser: {seconds:.1f} s (uploaded, Ingest enabled after {uploaded:.1f} s; after the click: {phases} s)")
    return seconds, db


def via_apptest(trace: Path, work: Path) -> tuple[float, Path]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    db = fresh_db(work, "apptest")
    os.environ["COMPILEWATCH_DB"] = str(db)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=1800)
    at.switch_page("views/upload.py")
    at.run()
    data = trace.read_bytes()
    t = time.perf_counter()
    at.file_uploader(key="up_files").upload(trace.name, data, "text/plain")
    at.run()
    at.button(key="up_go").click()
    at.run()
    seconds = time.perf_counter() - t
    problems = [str(e.value) for e in at.exception] + [str(e.value) for e in at.error]
    if problems:
        raise RuntimeError(f"upload page failed under AppTest: {problems}")
    if not any(re.search(r"\d+ stored · \d+ partial", str(s.value)) for s in at.success):
        raise RuntimeError("upload page showed no result line under AppTest")
    print(f"  apptest: {seconds:.1f} s")
    return seconds, db


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=105.0)
    ap.add_argument("--via", default="browser,apptest", help="app paths to measure: browser, apptest (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are compared (the machine is shared)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (trace, stores, screenshot)")
    args = ap.parse_args(argv)

    os.environ["COMPILEWATCH_BOOTSTRAP"] = "0"
    os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")
    work = Path(tempfile.mkdtemp(prefix="cw-bench-upload-"))
    try:
        trace = build_trace(work, args.size_mb)
        size = trace.stat().st_size
        print(f"trace: {trace.name}, {size / 2**20:.1f} MiB (public tlparse logs concatenated) in {work}")
        paths = {"browser": via_browser, "apptest": via_apptest}
        names = [v.strip() for v in args.via.split(",") if v.strip()]
        times: dict[str, list[float]] = {"cli": [], **{n: [] for n in names}}
        notes: dict[str, str] = {n: "" for n in names}
        reference = None
        # rounds interleave the paths, so a burst of load from other work hits them alike
        for r in range(args.repeat):
            print(f"round {r + 1}/{args.repeat}")
            cli_s, cli_db = via_cli(trace, work)
            times["cli"].append(cli_s)
            if reference is None:
                reference = counts(cli_db)
                print("  stored: " + ", ".join(f"{k} {v:,}" for k, v in reference.items() if v))
            print(f"  cli: {cli_s:.1f} s")
            for name in names:
                if notes[name].startswith("ERROR"):
                    continue
                try:
                    seconds, db = paths[name](trace, work)
                except Exception as e:
                    notes[name] = f"ERROR {type(e).__name__}: {e}"[:300]
                    continue
                times[name].append(seconds)
                got = counts(db)
                if got != reference:
                    notes[name] = "DIFFERENT ROWS: " + ", ".join(
                        f"{k} {got[k]} vs {reference[k]}" for k in TABLES if got[k] != reference[k])
        cli_s = statistics.median(times["cli"])
        rows = [("cli (compilewatch ingest)", cli_s, None, "", times["cli"])]
        for name in names:
            if not times[name]:
                rows.append((f"app via {name}", None, None, notes[name], []))
                continue
            med = statistics.median(times[name])
            rows.append((f"app via {name}", med, med / cli_s, notes[name], times[name]))

        print()
        print(f"{'path':<26} {'median s':>8} {'x cli':>7}  {'result':<6} each round (s)")
        ok = True
        for name, seconds, ratio, note, each in rows:
            if seconds is None:
                ok = False
                print(f"{name:<26} {'-':>8} {'-':>7}  {note}")
                continue
            verdict = "" if ratio is None else ("PASS" if ratio <= RATIO_BAR and not note else "FAIL")
            ok &= verdict != "FAIL"
            ratio_s = "" if ratio is None else f"{ratio:6.2f}x"
            print(f"{name:<26} {seconds:8.1f} {ratio_s:>7}  {verdict:<6} {' '.join(f'{x:.1f}' for x in each)} {note}".rstrip())
        print(f"\nbar: app <= {RATIO_BAR:.0f}x cli (medians of {args.repeat} rounds) for a {size / 2**20:.0f} MiB TORCH_TRACE")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
