"""Login with Streamlit's built-in OpenID Connect against a real OIDC provider started locally
(oidc-provider-mock): the real dashboard asks for login before any page, Chromium signs in through
the provider's authorization form, a real TORCH_LOGS file is uploaded, and the run records who
uploaded it. Secrets are given with --secrets.files, so no file in the checkout is touched.

    .venv/bin/pytest -m browser tests/app/test_login.py
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from compilewatch.store import open_store

from browser_support import (
    ROOT,
    _streamlit_bin,
    chromium_page,
    free_port,
    missing_browser,
    upload_files,
    wait_for_app_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

LOG = ROOT / "tests" / "fixtures" / "text" / "torch2.13_graph_breaks.log"


def _wait(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_login_then_upload_records_the_uploader(tmp_path):
    why = missing_browser()
    if why:
        pytest.skip(why)
    pytest.importorskip("authlib", reason="st.login needs Authlib (pip install -e '.[dev]')")
    pytest.importorskip("oidc_provider_mock", reason="pip install -e '.[dev]' brings oidc-provider-mock")
    oidc_port, app_port = free_port(), free_port()
    claims = {"sub": "alice", "email": "alice@example.com", "name": "Alice Example"}
    provider = subprocess.Popen([sys.executable, "-m", "oidc_provider_mock", "--port", str(oidc_port),
                                 "--user-claims", json.dumps(claims)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text(f"""
[auth]
redirect_uri = "http://127.0.0.1:{app_port}/oauth2callback"
cookie_secret = "{secrets.token_hex(16)}"
client_id = "compilewatch"
client_secret = "{secrets.token_hex(8)}"
server_metadata_url = "http://127.0.0.1:{oidc_port}/.well-known/openid-configuration"
""")
    db = tmp_path / "store" / "cw.duckdb"
    open_store(db)
    env = {**os.environ, "COMPILEWATCH_DB": str(db), "COMPILEWATCH_BOOTSTRAP": "0"}
    app = subprocess.Popen([_streamlit_bin(), "run", "app/main.py", "--server.headless", "true", "--server.port",
                            str(app_port), "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
                            f"--secrets.files={secrets_file}"], cwd=ROOT, env=env, stdout=open(tmp_path / "app.log", "wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(f"http://127.0.0.1:{oidc_port}/.well-known/openid-configuration", provider)
        base = f"http://127.0.0.1:{app_port}"
        _wait(base + "/_stcore/health", app)
        with chromium_page() as page:
            page.goto(base + "/upload")
            page.get_by_role("button", name="Log in").wait_for()
            assert page.locator('[data-testid="stFileUploaderDropzoneInput"]').count() == 0  # nothing before login
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(f"http://127.0.0.1:{oidc_port}/**")
            page.get_by_role("button", name="alice").click()   # the predefined user's button
            page.wait_for_url(base + "/**")
            page.get_by_text("Signed in as alice").wait_for(timeout=60_000)
            page.goto(base + "/upload")
            wait_for_app_idle(page, 60_000)
            upload_files(page, [LOG])
            page.get_by_role("button", name="Ingest").click()
            page.get_by_text("1 stored").wait_for(timeout=120_000)
            page.screenshot(path=str(tmp_path / "login_upload.png"), full_page=True)
        with open_store(db).read() as con:
            rows = con.execute("SELECT source, uploaded_by FROM runs").fetchall()
        assert rows == [("upload", "alice@example.com")]
    finally:
        _stop(app)
        _stop(provider)
