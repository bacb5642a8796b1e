"""Helpers for driving the real dashboard in headless Chromium: start `streamlit run app/main.py`
on a free port against a given store, open it through Playwright, and always clean up.

Used by tests/app/test_browser.py and benchmarks/bench_upload.py. Chromium is the system one
(/usr/bin/chromium); Playwright's own browser download is never used.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("COMPILEWATCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SERVER_START_TIMEOUT_S = 60


def missing_browser() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (the Python package) is not installed"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (set COMPILEWATCH_CHROMIUM)"
    if not _streamlit_bin():
        return "no streamlit executable next to this Python"
    return None


def _streamlit_bin() -> str | None:
    here = Path(sys.executable).parent / "streamlit"
    return str(here) if here.exists() else shutil.which("streamlit")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dashboard_server(db: Path, *, log_path: Path | None = None, extra_env: dict | None = None,
                     timeout: float = SERVER_START_TIMEOUT_S):
    """Run the dashboard against db; yields its base URL. The server (and anything it started)
    is stopped on exit, whatever happened inside."""
    port = free_port()
    env = {**os.environ, "COMPILEWATCH_DB": str(db), "COMPILEWATCH_BOOTSTRAP": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", **(extra_env or {})}
    cmd = [_streamlit_bin(), "run", "app/main.py", "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    # its own session, so stopping it also stops whatever it started, and nothing else
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with status {proc.returncode} before serving"
                                   + (f"; see {log_path}" if log_path else ""))
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit did not answer on {url} within {timeout:.0f} s")
            time.sleep(0.25)
        yield url
    finally:
        _stop(proc)
        if log_path:
            log.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


@contextmanager
def chromium_page(*, width: int = 1400, height: int = 1000, timeout_ms: int = 30_000):
    """A Playwright page in headless system Chromium; browser closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            browser.close()


def wait_for_app_idle(page, timeout_ms: int = 30_000) -> None:
    """Wait until the app is connected and its script is not running. Right after an action the
    rerun may not have started yet: wait for what the action should show instead."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)


def upload_files(page, paths: list[Path], timeout_ms: int = 600_000) -> None:
    """Put files into the first st.file_uploader on the page (this sends them to the server)."""
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files([str(p) for p in paths],
                                                                                     timeout=timeout_ms)
