"""`compilewatch report --post URL` against a real HTTP server on this machine: the Markdown report
arrives as the JSON body a Slack/Mattermost incoming webhook takes, a server that answers 503 at
first is retried, a refusal is final, and a server that is down is a clear error (exit 2) - with
the report file written all the same."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compilewatch.core.errors import PostError
from compilewatch.review.post import post_markdown

REPO = Path(__file__).resolve().parents[2]
LABELLED = REPO / "tests" / "fixtures" / "review" / "labelled"


class Webhook:
    """A webhook on 127.0.0.1 that answers each POST with the next status of `statuses` (then 200)."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.received: list[dict] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append({"type": self.headers["Content-Type"], "json": json.loads(body)})
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no such hook")

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/weekly"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    hooks = []

    def make(statuses=()):
        hooks.append(Webhook(statuses))
        return hooks[-1]
    yield make
    for h in hooks:
        h.close()


@pytest.fixture(scope="module")
def labelled_db(tmp_path_factory):
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import open_store
    db = tmp_path_factory.mktemp("post") / "cw.duckdb"
    assert ingest_paths(open_store(db), sorted(LABELLED.glob("labelled-job_*.tar.gz"))).ok
    return db


def _report(db, *args):
    return subprocess.run([sys.executable, "-m", "compilewatch", "report", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=300)


def test_the_report_arrives_as_a_webhook_body(labelled_db, webhook, tmp_path):
    hook = webhook()
    out = tmp_path / "review.md"
    r = _report(labelled_db, "--out", str(out), "--post", hook.url)
    assert r.returncode == 0, r.stderr
    assert len(hook.received) == 1 and hook.received[0]["type"] == "application/json"
    body = hook.received[0]["json"]
    assert body["text"] == body["body"] == out.read_text()   # the same Markdown as the file
    assert "## Got worse" in body["text"] and "train_x.py:55" in body["text"]
    assert "posted the report" in r.stdout


def test_a_busy_server_is_retried_and_a_refusal_is_final(webhook):
    busy = webhook([503, 502])
    waits = []
    sent = post_markdown(busy.url, "# weekly", sleep=waits.append)
    assert (sent.status, sent.attempts) == (200, 3) and waits == [1.0, 2.0]   # exponential backoff
    gone = webhook([404])
    with pytest.raises(PostError) as e:
        post_markdown(gone.url, "# weekly", sleep=waits.append)
    assert "HTTP 404" in e.value.title and "no such hook" in e.value.title and len(gone.received) == 1


def test_a_server_that_is_down_is_a_clear_error(labelled_db, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]      # closed again: nothing listens there
    out = tmp_path / "review.md"
    r = _report(labelled_db, "--out", str(out), "--post", f"http://127.0.0.1:{port}/hook")   # 1+2+4 s of backoff
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"could not deliver the report to http://127.0.0.1:{port}/hook after 4 tries" in r.stderr
    assert "Connection refused" in r.stderr or "ConnectionRefusedError" in r.stderr
    assert out.exists() and "## Got worse" in out.read_text()   # the file is not lost with the post
