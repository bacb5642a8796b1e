"""`compilewatch push`'s side of the team server's push API (compilewatch.app.push_api): pack the
bundles and logs into one .tar.gz, send it with the push token, and follow the push until its runs
are stored. Only the standard library: a CI runner needs nothing of the store, and no database.

The pack is the same bytes for the same inputs (members sorted, owners and the gzip time zeroed,
each file's own mtime kept), so a job that pushes the same bundles twice makes one push.
"""
from __future__ import annotations

import gzip
import json
import os
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from compilewatch.core.errors import InputError, PushError

TIMEOUT_S = 60.0          # one request; --wait polls within its own limit


def token_from(token_file: str | None, env_value: str) -> str:
    """The push token: the file's first line with --token-file, else the environment's value."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip().splitlines()
        except OSError as e:
            raise InputError(f"cannot read the token file {token_file}: {e.strerror}", "give a readable file") from None
        token = token[0].strip() if token else ""
    else:
        token = env_value.strip()
    if not token:
        raise InputError("no push token: set COMPILEWATCH_PUSH_TOKEN or give --token-file FILE",
                         "make one on the server with `compilewatch token add NAME` and keep it as a CI secret")
    return token


def pack(paths: list[str], out: Path) -> int:
    """Write `paths` (bundle folders, bundle archives, log files, folders of them) into `out` as a
    .tar.gz, each under its own name. Returns the number of files packed."""
    names: set[str] = set()
    files = 0

    def normal(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT, dereference=True) as tf:
        for i, p in enumerate(Path(x) for x in paths):
            name = p.resolve().name
            arc = name if name not in names else f"{i}-{name}"
            names.add(arc)
            for path, member in _walk(p, arc):
                info = normal(tf.gettarinfo(path, member))
                if info.isfile():
                    with open(path, "rb") as f:
                        tf.addfile(info, f)
                    files += 1
                else:
                    tf.addfile(info)
    return files


def _walk(root: Path, arc: str):
    """(path, name in the pack) for root and, for a folder, everything under it, sorted; links are
    followed (the server refuses links in a pack)."""
    yield root, arc
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames.sort()
            rel = Path(dirpath).relative_to(root)
            for d in dirnames:
                yield Path(dirpath, d), str(Path(arc, rel, d))
            for f in sorted(filenames):
                yield Path(dirpath, f), str(Path(arc, rel, f))


class Server:
    """The team server at `url`, spoken to with `token`."""

    def __init__(self, url: str, token: str):
        if not url.startswith(("http://", "https://")):
            raise InputError(f"--server {url!r} is not an http(s) URL", "e.g. --server http://compilewatch.internal:8501")
        self.url = url.rstrip("/")
        self.token = token

    def _send(self, method: str, path: str, body=None, headers: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(f"{self.url}{path}", data=body, method=method,
                                         headers={"Authorization": f"Bearer {self.token}", **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                status, body = answer.status, answer.read()
            try:
                return status, json.loads(body or b"{}")
            except ValueError:   # a page, not the API: a dashboard of a version without it, or another server
                raise PushError(f"{self.url} has no push API ({method} {path} answered with a page, not JSON)",
                                "point --server at a `compilewatch dashboard` of this version") from None
        except urllib.error.HTTPError as e:
            try:
                said = json.loads(e.read() or b"{}")
            except ValueError:
                said = {}
            raise PushError(f"the server refused it (HTTP {e.code}): {said.get('error') or e.reason}",
                            said.get("hint") or None) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise PushError(f"cannot reach the team server at {self.url}: {reason}",
                            "check --server / COMPILEWATCH_SERVER and that `compilewatch dashboard` runs there") from None

    def push(self, packed: Path, files: int) -> dict:
        # asked first: a refusal of a body the server has not read would reach us as a broken pipe
        self._send("GET", f"/api/push?size={packed.stat().st_size}&files={files}")
        with open(packed, "rb") as body:
            _, answer = self._send("POST", "/api/push", body, {"Content-Type": "application/gzip",
                                                               "Content-Length": str(packed.stat().st_size)})
        return answer

    def status(self, push_id: str) -> dict:
        return self._send("GET", f"/api/push/{push_id}")[1]

    def wait(self, push_id: str, timeout_s: float, poll_s: float = 0.5) -> dict:
        """The push's status once its runs are stored (its receipt), polling until `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self.status(push_id)
            if answer.get("state") == "settled":
                return answer
            if time.monotonic() > deadline:
                raise PushError(f"push {push_id} was not ingested within {timeout_s:g} s (it is {answer.get('state')})",
                                "it stays queued on the server: ask again later, or give --timeout more seconds; "
                                "is an inbox worker running there (`compilewatch dashboard --inbox-workers`)?")
            time.sleep(poll_s)

    def check(self, runs: list[str], baseline: list[str]) -> dict:
        body = json.dumps({"runs": runs, "baseline": baseline}).encode()
        return self._send("POST", "/api/check", body, {"Content-Type": "application/json"})[1]
