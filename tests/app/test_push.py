"""`compilewatch push` against a real team server (`compilewatch dashboard`, push_support.py) over
real HTTP: a CI runner with no database and no mount gets its runs stored and judged; concurrent
pushes store every run once; a push cut off mid-body leaves nothing; a server killed mid-ingest
recovers its inbox; every refusal says why. The bundles are real runs (sample_logs/ and
tests/fixtures/review/, each folder's README names the command that made them)."""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from push_support import (REVIEW, ROOT, TeamServer, cli, client_env, kill_mid_ingest, push_baseline_then_regression,
                          restart_until_settled)

SAMPLES = [*sorted((ROOT / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz")),
           *sorted((ROOT / "sample_logs" / "cpu-torch2.13-versions").glob("*.tar.gz")),
           *sorted((ROOT / "sample_logs" / "cpu-torch2.14.1").glob("*.tar.gz"))]
MAX_MB = 2
MAX_FILES = 40

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = TeamServer(tmp_path_factory.mktemp("team-server"),
                   {"COMPILEWATCH_PUSH_MAX_MB": str(MAX_MB), "COMPILEWATCH_PUSH_MAX_FILES": str(MAX_FILES)}).start()
    s.ci_token = s.token("ci")
    yield s
    s.stop()


def _push(server, paths, *flags, tmp: Path, token: str | None = None):
    """`compilewatch push` as a CI runner runs it: its own folder, no store settings."""
    env = client_env(tmp)
    env["COMPILEWATCH_PUSH_TOKEN"] = token or server.ci_token
    return cli("push", *paths, "--server", server.url, *flags, env=env, cwd=tmp)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_push_wait_check_gates_ci_from_a_runner_with_no_database(server, tmp_path):
    """The done-when of the push: a separate process with no database settings and no mount pushes
    the candidate's bundles, waits for them to be stored and gets the verdict; exit 1 on a
    regression, 0 on an unchanged job."""
    base = _push(server, sorted((REVIEW / "clean").glob("*.tar.gz")), "--wait", tmp=tmp_path)
    assert base.returncode == 0, base.stdout + base.stderr
    assert base.stdout.count("file(s) stored") == 4 and "0 failed" in base.stdout

    worse = _push(server, sorted((REVIEW / "breaks").glob("*.tar.gz")), "--wait", "--check", "--baseline",
                  "label=clean", "--json", tmp=tmp_path)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    out = json.loads(worse.stdout)
    runs = out["push"]["runs"]
    assert len(runs) == 3 and all(r["stored"] > 0 for r in runs)
    assert all(r["url"] == f"{server.url}/run?run={r['run_id']}" for r in runs)
    assert out["check"]["status"] == "failed"
    assert {"graph_breaks", "recompiles"} <= {v["metric"] for v in out["check"]["regressions"]}

    same = _push(server, sorted((REVIEW / "clean_rerun").glob("*.tar.gz")), "--wait", "--check", "--baseline",
                 "label=clean", tmp=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "compilewatch check passed: 0 regression(s)" in same.stdout
    # the runner kept nothing: no store, no database anywhere under its folder
    assert not list(tmp_path.rglob("*.duckdb")) and not (tmp_path / ".compilewatch").exists()


def test_twenty_concurrent_pushes_store_every_run_once(server, tmp_path):
    """20 `compilewatch push --wait` at once, 19 different real bundles (one pushed twice, by two
    pushers racing): each pusher gets its run, and each run is stored once, each file once."""
    bundles = [SAMPLES[i % len(SAMPLES)] for i in range(20)]
    assert len(set(bundles)) == 19
    env = client_env(tmp_path)
    env["COMPILEWATCH_PUSH_TOKEN"] = server.ci_token
    procs = [subprocess.Popen([sys.executable, "-m", "compilewatch", "push", str(b), "--server", server.url,
                               "--wait", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, cwd=tmp_path) for b in bundles]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    receipts = [json.loads(o[0])["push"] for o in outs]
    assert all(len(r["runs"]) == 1 and not r["failures"] for r in receipts)
    by_bundle = {}
    for b, r in zip(bundles, receipts):
        by_bundle.setdefault(b, set()).add(r["runs"][0]["run_id"])
    assert all(len(ids) == 1 for ids in by_bundle.values())          # the same bundle, the same run
    pushed = {next(iter(ids)) for ids in by_bundle.values()}
    assert len(pushed) == 19
    stored = {run: (n, distinct) for run, n, distinct in server.runs()}
    assert pushed <= set(stored)
    assert all(stored[r][0] == stored[r][1] for r in pushed)          # no file stored twice


def test_refusals_say_why_and_queue_nothing(server, tmp_path):
    inbox = server.store_folder / "inbox"
    before = sorted(p.name for p in inbox.iterdir()) if inbox.exists() else []
    bundle = [str(SAMPLES[0])]

    # no token, a wrong one, a malformed one, a revoked one
    code, said = server.request("POST", "/api/push", b"x")
    assert code == 401 and "no push token" in said["error"]
    wrong = server.ci_token[:-4] + ("AAAA" if not server.ci_token.endswith("AAAA") else "BBBB")
    refused = _push(server, bundle, tmp=tmp_path, token=wrong)
    assert refused.returncode == 2 and "HTTP 403" in refused.stderr and "not known to this server" in refused.stderr
    refused = _push(server, bundle, tmp=tmp_path, token="hunter2")
    assert refused.returncode == 2 and "malformed" in refused.stderr
    revoked = server.token("leaver")
    token_id = revoked.split("_")[1]
    done = cli("token", "revoke", token_id, "--db", server.db, env=server.env)
    assert done.returncode == 0 and "revoked" in done.stdout
    refused = _push(server, bundle, tmp=tmp_path, token=revoked)
    assert refused.returncode == 2 and f"push token {token_id} (leaver) was revoked" in refused.stderr
    listed = cli("token", "list", "--db", server.db, "--json", env=server.env)
    assert {t["name"]: bool(t["revoked_at"]) for t in json.loads(listed.stdout)} == {"ci": False, "leaver": True}

    # a body over the cap: said before a byte of it is read (Content-Length), and by the CLI
    big = tmp_path / "big.log"
    big.write_bytes(os.urandom((MAX_MB + 1) * 2**20))
    refused = _push(server, [str(big)], tmp=tmp_path)
    assert refused.returncode == 2 and "HTTP 413" in refused.stderr and f"{MAX_MB:,} MiB cap" in refused.stderr
    assert "COMPILEWATCH_PUSH_MAX_MB" in refused.stderr      # the hint names the fix
    # ... and by the server itself to a client that does not ask first: before a byte of the body
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall((f"POST /api/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.ci_token}\r\n"
                   f"Content-Length: {(MAX_MB + 1) * 2**20}\r\n\r\n").encode())
        s.settimeout(30)
        answer = b""
        while not (answer.count(b"\r\n\r\n") and answer.rstrip().endswith(b"}")):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413") and f"{MAX_MB:,} MiB cap" in answer
    # too many files
    many = tmp_path / "many"
    many.mkdir()
    for i in range(MAX_FILES + 1):
        (many / f"{i}.log").write_text("x\n")
    refused = _push(server, [str(many)], tmp=tmp_path)
    assert refused.returncode == 2 and f"more than this server's cap of {MAX_FILES}" in refused.stderr

    # hostile archives, sent as they are, not as `compilewatch push` packs: each refused with its reason
    link = tarfile.TarInfo("bundle/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    device = tarfile.TarInfo("bundle/zero")
    device.type = tarfile.CHRTYPE
    bomb = tarfile.TarInfo("bundle/huge.log")
    bomb.size = 9 * 2**30        # declares more than archive_max_bytes: refused before anything is read
    for body, reason in ((_tar([_file("../../evil.log", b"x")]), "escapes the archive"),
                         (_tar([(link, None)]), "is a link"),
                         (_tar([(device, None)]), "device or special file"),
                         (gzip.compress(bomb.tobuf()), "unpacks to more than"),
                         (b"\x1f\x8b" + os.urandom(200), "damaged or not a readable archive")):
        code, said = server.request("POST", "/api/push", body, token=server.ci_token)
        assert code == 422 and reason in said["error"], (reason, code, said)
    assert sorted(p.name for p in inbox.iterdir()) == before                # nothing was queued


def test_a_hostile_archive_inside_a_push_fails_with_its_reason_and_may_be_pushed_again(server, tmp_path):
    """An archive among the pushed inputs is unpacked when the push is ingested, under the same
    rules: one whose member escapes it fails there, the receipt and the CLI say why (exit 1), the
    real bundle beside it is stored. Pushed again, the same bytes are taken again, not answered
    with the old receipt."""
    evil = tmp_path / "evil.tar.gz"
    evil.write_bytes(_tar([_file("../../outside.log", b"x\n")]))
    good = REVIEW / "labelled" / "labelled-job_v1_run1.tar.gz"       # pushed by no other test here
    pushed = _push(server, [str(evil), str(good)], "--wait", "--json", tmp=tmp_path)
    assert pushed.returncode == 1, pushed.stderr
    receipt = json.loads(pushed.stdout)["push"]
    assert [f["file"] for f in receipt["failures"]] == ["evil.tar.gz"]
    assert "escapes the archive" in receipt["failures"][0]["message"]
    assert len(receipt["runs"]) == 1 and receipt["stored"] > 0        # the good bundle beside it is stored
    again = _push(server, [str(evil), str(good)], "--wait", tmp=tmp_path)
    assert again.returncode == 1 and "queued" in again.stdout and "FAILED: evil.tar.gz" in again.stdout
    assert "escapes the archive" in again.stdout


def test_a_push_cut_off_mid_body_leaves_nothing(server, tmp_path):
    """The client dies after half its body: nothing is queued, nothing stored, no staged bytes left."""
    body = (SAMPLES[-1]).read_bytes()
    runs_before = server.runs()
    inbox = server.store_folder / "inbox"
    before = sorted(p.name for p in inbox.iterdir()) if inbox.exists() else []
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall((f"POST /api/push HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.ci_token}\r\n"
                   f"Content-Type: application/gzip\r\nContent-Length: {len(body)}\r\n\r\n").encode())
        s.sendall(body[:len(body) // 2])
        time.sleep(1.0)          # the server has begun staging the body
    deadline = time.monotonic() + 30
    tmp = server.store_folder / "tmp"
    while list(tmp.rglob("push-*.part")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(tmp.rglob("push-*.part"))
    assert sorted(p.name for p in inbox.iterdir()) == before
    assert server.runs() == runs_before
    # and the whole push, sent afterwards, is taken
    ok = _push(server, [str(SAMPLES[-1])], "--wait", tmp=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_a_server_killed_mid_ingest_recovers_its_inbox(tmp_path):
    """SIGKILL to the whole server (dashboard and inbox worker) while the worker ingests a push: the
    push stays known; a new server on the same store puts the dead worker's claim back and stores
    the run, once, each file once."""
    server = TeamServer(tmp_path / "server").start()
    try:
        token = server.token()
        bundle = max((ROOT / "sample_logs" / "gpu-h200-torch2.11").glob("*.tar.gz"), key=lambda p: p.stat().st_size)
        pushed = cli("push", bundle, "--server", server.url, "--json", cwd=tmp_path,
                     env={**client_env(tmp_path), "COMPILEWATCH_PUSH_TOKEN": token})
        push_id = json.loads(pushed.stdout)["push"]["push"]
        work = server.store_folder / "inbox" / ".work"
        kill_mid_ingest(server, work, f"*/push-{push_id}.tar.gz")
        assert list(work.glob(f"*/push-{push_id}.tar.gz")), "the ingest ended before the kill"   # a dead claim
        restart_until_settled(server, push_id, token)
    finally:
        server.stop()


@pytest.mark.browser
def test_a_receipts_run_link_opens_its_run_page(server, tmp_path):
    """The pages are served by the same server as the API (st.App): the link a receipt gives opens
    the run's Run detail page in Chromium, with the run on it and no exception."""
    from browser_support import chromium_page, missing_browser, wait_for_app_idle
    from playwright.sync_api import expect

    reason = missing_browser()
    if reason:
        pytest.skip(reason)
    pushed = _push(server, [str(SAMPLES[1])], "--wait", "--json", tmp=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    run = json.loads(pushed.stdout)["push"]["runs"][0]
    with chromium_page(timeout_ms=120_000) as page:
        page.goto(run["url"])
        page.get_by_role("heading", name="Run detail").first.wait_for()
        page.get_by_text("Graph breaks").first.wait_for()
        wait_for_app_idle(page, 120_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        # the run the link names is the one picked: the Run picker's value (a property of its input,
        # which the page's HTML carries only when the input was first drawn with it) starts with it
        expect(page.get_by_role("combobox", name="Run")).to_have_value(re.compile("^" + run["run_id"]))
        with tarfile.open(SAMPLES[1]) as tf:
            manifest = json.load(tf.extractfile(next(m for m in tf if m.name.endswith("manifest.json"))))
        page.get_by_text(manifest["model"], exact=True).first.wait_for()   # the Model field, once rendered


def test_push_to_a_team_server_on_ducklake(lake_spec, tmp_path):
    """The same push, wait and check against a server whose store is DuckLake on PostgreSQL."""
    server = TeamServer(tmp_path / "server", lake_spec=lake_spec).start()
    try:
        server.ci_token = server.token()
        push_baseline_then_regression(_push, server, tmp_path)
    finally:
        server.stop()


def test_a_server_without_the_push_api_is_said_so(tmp_path):
    """--server pointing at a web server that answers with a page (another service, or a dashboard
    of a version without the API): one sentence saying so, exit 2, no traceback."""
    from browser_support import free_port

    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "push").write_text("<html>a page</html>")
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = {**client_env(tmp_path), "COMPILEWATCH_PUSH_TOKEN": "cwp_0123456789abcdef_" + "a" * 43}
        deadline = time.monotonic() + 30
        while True:
            said = cli("push", SAMPLES[0], "--server", f"http://127.0.0.1:{port}", env=env, cwd=tmp_path)
            if "cannot reach" not in said.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert said.returncode == 2 and "has no push API" in said.stderr and "Traceback" not in said.stderr, said.stderr
    finally:
        web.terminate()
        web.wait(10)
