"""`compilewatch dashboard` lets only this machine in unless told otherwise: the real server, started
by the real command, answers on 127.0.0.1 and refuses a connection to the host's own network address."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from browser_support import free_port

ROOT = Path(__file__).resolve().parents[2]


def _lan_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


@pytest.mark.timeout(120)
def test_dashboard_listens_on_loopback_only_by_default(tmp_path):
    lan = _lan_address()
    if lan is None:
        pytest.skip("this machine has no non-loopback address to try")
    port = free_port()
    env = {**os.environ, "COMPILEWATCH_BOOTSTRAP": "0", "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    env.pop("COMPILEWATCH_LISTEN_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "dashboard", "--db", str(tmp_path / "s" / "cw.duckdb"),
                             "--port", str(port)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the dashboard did not start"
                time.sleep(0.3)
        with pytest.raises(OSError):
            socket.create_connection((lan, port), timeout=3).close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
