"""Twenty writers and four dashboards on one brand-new DuckLake team store (a real PostgreSQL from
tests/conftest.py): twenty `compilewatch ingest` processes started together, each with a real CPU
bundle (sample_logs/cpu-torch2.13/, re-sent under new run ids), every bundle given to two of them;
four `compilewatch dashboard` servers started on the empty catalog just before, each with a reader
rendering the Overview, hotspots and storms pages over the server's websocket the whole time.

Nothing lost (every bundle's files stored), nothing stored twice (each of them once, the racing
copy told it is a duplicate), no file failed, no page raised or showed an error, and the ingests'
result tables count their commit retries (store.files.transactions retries a conflicting commit).

    .venv/bin/python -m pytest tests/app/test_twenty_writers.py -q
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from push_support import TeamServer
from stream_reader import render_pages

from benchmarks.bench_lake_ingest import make_bundles
from compilewatch.store import open_store

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
WRITERS, DASHBOARDS = 20, 4
BUNDLES = WRITERS // 2          # each raced by two writers
PAGES = ["", "hotspots", "recompiles"]    # url paths; "" is the Overview
QUERY = {"from": "2000-01-01", "to": "2100-01-01"}
# the ingest's closing line, and the retries that line adds when there were any (cli ingest)
SUMMARY = re.compile(r"^(\d+) stored, (\d+) duplicate, (\d+) failed.*?(?:, (\d+) commit\(s\) retried)?$", re.M)
TABLE_HEADER = re.compile(r"^file\s+kind\s+status\s+records\s+errors\s+retries\s+note", re.M)


def _read_all(urls: list[str], writers_done) -> list[list]:
    """A reader per server, rendering its pages two seconds apart until the writers are done, then once more."""
    async def every():
        return await asyncio.gather(*(render_pages(u, PAGES, QUERY, writers_done, pause=2.0) for u in urls))
    return asyncio.run(every())


def test_twenty_writers_and_four_dashboards_on_a_new_lake(postgres, tmp_path):
    postgres.create_database("twenty_writers", fresh=True)
    spec = postgres.lake_spec("twenty_writers")
    data = tmp_path / "lake-data"
    bundles = make_bundles(BUNDLES, tmp_path)
    expected_files = {b.name: sum(1 for p in b.rglob("*") if p.is_file()) for b in bundles}
    run_ids = {b.name: json.loads((b / "manifest.json").read_text())["run_id"] for b in bundles}

    servers = [TeamServer(tmp_path / f"dash{i}", inbox_workers=0, lake_spec=spec) for i in range(DASHBOARDS)]
    for s in servers:
        s.store_folder = data
        s.env["COMPILEWATCH_DATA_PATH"] = str(data)
    env = {**os.environ, "COMPILEWATCH_DB": spec, "COMPILEWATCH_DATA_PATH": str(data)}
    logs = [tmp_path / f"writer{k}.log" for k in range(WRITERS)]
    procs: list[subprocess.Popen] = []
    try:
        for s in servers:
            s.start(timeout=180)
        # every bundle raced by two writers
        for k in range(WRITERS):
            procs.append(subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", "--quiet", "--workers", "1",
                                           str(bundles[k % BUNDLES])], cwd=ROOT, env=env, stdout=logs[k].open("w"),
                                          stderr=subprocess.STDOUT))
        t0 = time.monotonic()
        renders = _read_all([s.url for s in servers], lambda: all(p.poll() is not None for p in procs))
        ingest_s = time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for s in servers:
            s.stop()

    outs = [log.read_text() for log in logs]
    assert all(p.returncode == 0 for p in procs), [o[-2000:] for p, o in zip(procs, outs) if p.returncode]
    totals = []
    for out in outs:
        assert TABLE_HEADER.search(out), out[:2000]          # the retries column of the result table
        m = SUMMARY.search(out)
        assert m, out[-2000:]
        totals.append(tuple(int(g or 0) for g in m.groups()))
    n_files = sum(expected_files.values())
    assert sum(t[0] for t in totals) == n_files, totals       # nothing lost
    assert sum(t[1] for t in totals) == n_files, totals       # the racing copy of each file was a duplicate
    assert all(t[2] == 0 for t in totals), totals             # no file failed

    store = open_store(spec, data)
    try:
        with store.read() as con:
            stored = {r: (n, d) for r, n, d in con.execute(
                "SELECT run_id, count(*), count(DISTINCT sha256) FROM files GROUP BY run_id").fetchall()}
            runs = con.execute("SELECT run_id, count(*) FROM runs GROUP BY run_id").fetchall()
            stale = con.execute("SELECT count(*) FROM stale_runs").fetchall()[0][0]
            derived = {r for (r,) in con.execute("SELECT DISTINCT run_id FROM run_metrics").fetchall()}
    finally:
        store.close()
    assert stored == {run_ids[b]: (n, n) for b, n in expected_files.items()}   # each file once, in its run
    assert sorted(runs) == sorted((r, 1) for r in run_ids.values())            # each run once
    assert stale == 0 and derived == set(run_ids.values())                      # every run's facts refreshed

    # the readers rendered all along, and no page raised or showed an error
    assert all(len(r) >= 2 * len(PAGES) for r in renders), [len(r) for r in renders]
    assert {x.page for rs in renders for x in rs} == {"overview", "hotspots", "recompiles"}
    failed = [(x.page, x.exceptions, x.errors) for rs in renders for x in rs if x.exceptions or x.errors]
    assert not failed, failed[:5]
    # each reader's last Overview, rendered after the writers were done, shows every run
    for rs in renders:
        last = [x for x in rs if x.page == "overview"][-1]
        assert last.metrics.get("Runs") == str(BUNDLES), last.metrics
    print(f"{WRITERS} writers: {ingest_s:.0f} s, {sum(t[3] for t in totals)} commit retries, "
          f"{sum(len(r) for r in renders)} page renders")
