"""Many writers and crashes on the real server.

1. Eight browser contexts upload eight different real collector bundles (sample_logs/) at the same
   time, while `compilewatch ingest` stores other bundles from the command line and an inbox worker
   ingests bundles dropped into the inbox: every run is stored exactly once, no page shows a lock
   error or a Streamlit exception.
2. kill -9 of the dashboard in the middle of an upload's ingest: the store opens, holds no
   half-stored file, the killed server's scratch is swept, and a rerun stores the file once.

    .venv/bin/pytest -m browser tests/app/test_many_writers.py
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, scratch

from browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    dashboard_server,
    missing_browser,
    upload_files,
    wait_for_app_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

BUNDLES = sorted((ROOT / "sample_logs").rglob("*.tar.gz"))
TEXT_LOG = ROOT / "tests" / "fixtures" / "text" / "torch2.13_all.log"
WAIT_MS = 180_000


def _run_id(bundle: Path) -> str:
    import json

    with tarfile.open(bundle) as tf:
        m = next(x for x in tf.getmembers() if x.name.endswith("manifest.json"))
        return json.loads(tf.extractfile(m).read())["run_id"]


def _files_in(bundle: Path) -> int:
    with tarfile.open(bundle) as tf:
        return sum(1 for m in tf.getmembers() if m.isfile())


def _start_upload(page, url: str, path: Path) -> None:
    page.goto(url + "/upload")
    wait_for_app_idle(page, WAIT_MS)
    upload_files(page, [path], timeout_ms=WAIT_MS)
    page.wait_for_function(
        "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith('Ingest') && !b.disabled)",
        timeout=WAIT_MS)
    page.get_by_role("button", name="Ingest").click()


def test_eight_uploads_a_cli_ingest_and_the_inbox_at_once(tmp_path):
    why = missing_browser()
    if why:
        pytest.skip(why)
    if len(BUNDLES) < 14:
        pytest.skip("needs 14 sample bundles")
    uploads, cli, inbox_bundles = BUNDLES[:8], BUNDLES[8:11], BUNDLES[11:14]
    db = tmp_path / "store" / "cw.duckdb"
    store = open_store(db)
    store.inbox_dir.mkdir(exist_ok=True)
    from playwright.sync_api import sync_playwright

    with dashboard_server(db, log_path=tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            pages = [browser.new_context(viewport={"width": 1300, "height": 900}).new_page() for _ in uploads]
            for page, bundle in zip(pages, uploads):
                page.set_default_timeout(WAIT_MS)
                page.goto(url + "/upload")
            for page in pages:
                wait_for_app_idle(page, WAIT_MS)
            for page, bundle in zip(pages, uploads):
                upload_files(page, [bundle], timeout_ms=WAIT_MS)
            for page in pages:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith('Ingest') && !b.disabled)",
                    timeout=WAIT_MS)
            # the other writers start now, beside the eight clicks
            cli_proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", *map(str, cli), "--db", str(db),
                                         "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for i, b in enumerate(inbox_bundles):
                (store.inbox_dir / f".{b.name}.part").write_bytes(b.read_bytes())
                (store.inbox_dir / f".{b.name}.part").rename(store.inbox_dir / b.name)
            inbox_proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "inbox", "--db", str(db)], cwd=ROOT,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for page in pages:
                page.get_by_role("button", name="Ingest").click()
            for i, page in enumerate(pages):
                try:
                    page.get_by_text(re.compile(r"\b[1-9]\d* stored\b")).first.wait_for(timeout=WAIT_MS)
                finally:
                    page.screenshot(path=str(tmp_path / f"upload{i}.png"), full_page=True)
            texts = [p.evaluate("document.body.innerText") for p in pages]
            exceptions = [p.locator('[data-testid="stException"]').count() for p in pages]
            cli_out = cli_proc.communicate(timeout=600)[0].decode()
            inbox_out = inbox_proc.communicate(timeout=600)[0].decode()
        finally:
            browser.close()
    assert cli_proc.returncode == 0, cli_out[-2000:]
    assert inbox_proc.returncode == 0, inbox_out[-2000:]
    assert exceptions == [0] * 8
    # every upload stored its whole bundle; a failed file's cause is in the page's text (upload.py)
    not_clean = [t for t in texts if not re.search(r"\b0 duplicates · 0 failed\b", t)]
    assert not not_clean, "\n---\n".join(not_clean)
    assert not any(re.search(r"lock|busy", t, re.I) for t in texts)
    expected = {_run_id(b) for b in uploads + cli + inbox_bundles}
    with store.read() as con:
        runs = {r[0]: r[1] for r in con.execute("SELECT run_id, source FROM runs").fetchall()}
        dupes = con.execute("SELECT count(*) FROM (SELECT run_id, sha256 FROM files GROUP BY ALL HAVING count(*) > 1)").fetchall()[0][0]
        per_run = con.execute("SELECT run_id, count(*) FROM files GROUP BY run_id").fetchall()
    assert set(runs) == expected and dupes == 0
    assert sorted({v for v in runs.values()}) == ["bundle", "inbox", "upload"]
    files_in = {_run_id(b): _files_in(b) for b in uploads + cli + inbox_bundles}
    assert dict(per_run) == files_in
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_kill_9_of_the_dashboard_mid_upload_then_rerun(tmp_path):
    why = missing_browser()
    if why:
        pytest.skip(why)
    big = tmp_path / "big_torch_logs.log"
    with open(big, "wb") as out:  # a real log repeated: long enough to be killed mid-ingest
        body = TEXT_LOG.read_bytes()
        for _ in range(60 * 2**20 // len(body)):
            out.write(body)
    db = tmp_path / "store" / "cw.duckdb"
    store = open_store(db)
    from playwright.sync_api import sync_playwright

    killed_pid = None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            with dashboard_server(db, log_path=tmp_path / "server.log") as url:
                page = browser.new_page()
                page.set_default_timeout(WAIT_MS)
                _start_upload(page, url, big)
                owned = store.tmp_root
                deadline = time.monotonic() + 120
                # wait until the server is inside the ingest: its staged rows are on disk
                while time.monotonic() < deadline and not any(owned.rglob("stage-*/*.ndjson")):
                    time.sleep(0.05)
                server_dirs = [d for d in owned.iterdir() if d.is_dir() and any(d.rglob("stage-*"))]
                assert server_dirs, "the upload's ingest had started when the server was killed"
                killed_pid = int(server_dirs[0].name.rsplit("-", 1)[1])
                os.kill(killed_pid, signal.SIGKILL)
                time.sleep(1)
        finally:
            browser.close()
    # the store opens, nothing of the file was stored, and the dead server's scratch is swept
    store = open_store(db)
    assert not any((store.tmp_root / f"{scratch.host()}-{killed_pid}").rglob("*"))
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 0
        assert con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0] == 0
    rep = ingest_paths(store, [big])
    assert rep.files[0].status in ("stored", "partial")
    rep2 = ingest_paths(store, [big])
    assert rep2.files[0].status == "duplicate"
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 1
