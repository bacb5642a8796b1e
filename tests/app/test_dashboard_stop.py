"""`compilewatch dashboard &` from a non-interactive script (SIGINT ignored, as such a shell starts
it): SIGINT and SIGTERM stop the server and every inbox worker it started, within seconds."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from browser_support import free_port

REPO = Path(__file__).resolve().parents[2]
STOPPED_WITHIN_S = 20


def _ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_dashboard_and_its_workers_stop_when_told(tmp_path, sig):
    port = free_port()
    env = {**os.environ, "COMPILEWATCH_DB": str(tmp_path / "s" / "cw.duckdb"), "COMPILEWATCH_BOOTSTRAP": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "dashboard", "--port", str(port),
                             "--inbox-workers", "2"], cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_ignoring_sigint, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
                time.sleep(0.3)
        group = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(group) >= 4                                   # itself, the server, two workers
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=STOPPED_WITHIN_S)
        assert f"dashboard stopped ({signal.Signals(sig).name})" in out
        time.sleep(0.5)
        assert subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).returncode == 1, "a child lives on"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
