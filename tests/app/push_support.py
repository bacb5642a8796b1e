"""A real team server for the push tests: `compilewatch dashboard` started as a user starts it, on a
free port, over an embedded store of its own, with its inbox worker; push tokens made by the real
`compilewatch token add`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from browser_support import free_port

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, env=None, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compilewatch", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def client_env(tmp: Path) -> dict:
    """A CI runner's environment: no store settings at all (no database, no data path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPILEWATCH_")}
    env["HOME"] = str(tmp)
    return env


class TeamServer:
    def __init__(self, folder: Path, extra_env: dict | None = None, inbox_workers: int = 1, lake_spec: str | None = None,
                 data_path: str | None = None):
        self.folder = folder
        self.db = lake_spec or folder / "store" / "cw.duckdb"
        # a DuckLake store's data path: a folder of the server's, or the s3://bucket/prefix given
        self.data_path = data_path or (str(folder / "lake-data") if lake_spec else None)
        # where the store keeps inbox/ and tmp/ on this host: the database's folder, or a DuckLake
        # store's data path; none for a data path on object storage
        self.store_folder = None if data_path else Path(self.data_path) if lake_spec else self.db.parent
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "COMPILEWATCH_DB": str(self.db), "COMPILEWATCH_BOOTSTRAP": "0",
                    "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
                    # as every test but test_review_refresh.py (tests/conftest.py); a module's server
                    # starts before that function-scoped setting applies
                    "COMPILEWATCH_REVIEW_REFRESH": "0", **(extra_env or {})}
        if lake_spec:
            self.env["COMPILEWATCH_DATA_PATH"] = self.data_path
        self.inbox_workers = inbox_workers
        self.proc: subprocess.Popen | None = None
        self.log = folder / "server.log"

    def start(self, timeout: float = 90) -> "TeamServer":
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "dashboard", "--port", str(self.port),
                                      "--inbox-workers", str(self.inbox_workers)],
                                     cwd=self.folder, env=self.env, stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, \
                f"the dashboard did not start: {self.log.read_text()[-3000:]}"
            time.sleep(0.3)

    def token(self, name: str = "ci") -> str:
        made = cli("token", "add", name, "--db", self.db, env=self.env)
        assert made.returncode == 0, made.stderr
        return made.stdout.splitlines()[1].strip()

    def kill(self, sig=signal.SIGKILL) -> None:
        """Every process of the server (the dashboard, its inbox workers) at once."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def request(self, method: str, path: str, body: bytes | None = None, token: str | None = None,
                headers: dict | None = None) -> tuple[int, dict]:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def runs(self) -> list[tuple[str, int, int]]:
        """(run_id, files, distinct sha256) per stored run, read by a process of its own."""
        code = ("import json, sys\nfrom compilewatch.store import open_store\n"
                "with open_store(sys.argv[1]).read() as con:\n"
                "    print(json.dumps(con.execute('SELECT run_id, count(*), count(DISTINCT sha256) FROM files "
                "GROUP BY run_id ORDER BY 1').fetchall()))")
        got = subprocess.run([sys.executable, "-c", code, str(self.db)], capture_output=True, text=True, env=self.env)
        assert got.returncode == 0, got.stderr
        return [tuple(r) for r in json.loads(got.stdout)]


REVIEW = ROOT / "tests" / "fixtures" / "review"


def push_baseline_then_regression(push, server: TeamServer, tmp: Path) -> None:
    """What a CI job's pushes make of a server: the baseline's real bundles (tests/fixtures/review/
    clean), then a candidate that regresses (breaks/) gated with --check (exit 1, REGRESSION), then
    the candidate again, a duplicate push; six runs stored, each file once. `push(server, paths,
    *flags, tmp=)` runs `compilewatch push` as the test's runner does."""
    base = push(server, sorted((REVIEW / "clean").glob("*.tar.gz")), "--wait", tmp=tmp)
    assert base.returncode == 0, base.stdout + base.stderr
    worse = push(server, sorted((REVIEW / "breaks").glob("*.tar.gz")), "--wait", "--check", "--baseline",
                 "label=clean", tmp=tmp)
    assert worse.returncode == 1 and "REGRESSION" in worse.stdout, worse.stdout + worse.stderr
    again = push(server, sorted((REVIEW / "breaks").glob("*.tar.gz")), "--wait", "--json", tmp=tmp)
    assert again.returncode == 0 and json.loads(again.stdout)["push"]["duplicate_push"], again.stdout + again.stderr
    runs = server.runs()
    assert len(runs) == 6 and all(n == d for _, n, d in runs)


def restart_until_settled(server: TeamServer, push_id: str, token: str) -> dict:
    """Start a killed server again, on a new port, and wait for push `push_id` to be settled: its
    receipt, once it holds the one run, stored with each file once."""
    server.port = free_port()
    server.url = f"http://127.0.0.1:{server.port}"
    server.start()
    deadline = time.monotonic() + 300
    while (said := server.request("GET", f"/api/push/{push_id}", token=token)[1])["state"] != "settled":
        assert time.monotonic() < deadline, said
        time.sleep(0.5)
    assert len(said["runs"]) == 1 and not said["failures"], said
    assert [(r, n == d) for r, n, d in server.runs()] == [(said["runs"][0]["run_id"], True)]
    return said


def kill_mid_ingest(server: TeamServer, folder: Path, claim: str) -> None:
    """SIGKILL to the whole server once its inbox worker has claimed a push (the glob `claim` under
    `folder` finds the entry it holds) and gone a moment into its ingest."""
    deadline = time.monotonic() + 60
    while not list(folder.glob(claim)):
        assert time.monotonic() < deadline, "the inbox worker never claimed the push"
        time.sleep(0.02)
    time.sleep(0.2)          # into the ingest of its many files
    server.kill()
