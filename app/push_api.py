"""The team server's push API, served beside the dashboard on its port (app/asgi.py mounts ROUTES
on Streamlit's own Starlette server through st.App): CI sends runs over HTTP with `compilewatch
push`, with no database settings and no mount of the store.

    GET  /api/push?size=&files=   would a push of that size be taken (asked before sending it)
    POST /api/push            body: a .tar(.gz) of bundles and logs (compilewatch push packs one)
    GET  /api/push/{push_id}  where the push stands; once ingested its receipt
    POST /api/check           {"runs": [...], "baseline": [SPEC, ...]}: the review's verdict on those runs

Every request carries a push token (`Authorization: Bearer cwp_...`, store/tokens.py). A push is
checked before anything is queued: the token, the body's size (push_max_mb; Content-Length first,
then the bytes as they come), and the archive itself against the rules every archive from a stranger
meets (ingest/archives.py: paths, links, entries, bytes, ratio) and the file cap (push_max_files).
Each refusal is an HTTP status with a JSON body {"error": reason, "hint": fix}. What passes is
queued in the store's inbox under a name made from its sha256 (store/inbox.py: the same bytes
pushed again are the same push) and ingested there by the inbox workers, through the pipeline
every ingest takes; their receipt is what GET answers. A client that goes away mid-body leaves
nothing: the body is staged in this process's scratch folder and queued only once complete.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from urllib.parse import quote

from anyio import to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from compilewatch.app import dashboard_settings as settings
from compilewatch.app.stores import shared
from compilewatch.core import settings as table
from compilewatch.core.errors import CompileWatchError
from compilewatch.ingest.archives import ArchiveError, Budget, check_tar
from compilewatch.store import inbox as queue
from compilewatch.store import tokens

RUN_PAGE = "run"          # the Run detail page's url_path in app/main.py; it reads ?run=<run id>
ENTRY = "push-{}.tar.gz"  # the inbox entry of a push; its id is the body's sha256, first 32 hex digits


def _store():
    return shared(str(settings.db_path()), settings.data_path())


def _refuse(status: int, error: str, hint: str = "") -> JSONResponse:
    return JSONResponse({"error": error, "hint": hint}, status_code=status)


def _cap(name: str) -> int:
    raw = settings.get(name)
    try:
        value = int(float(raw))
    except ValueError:
        value = -1
    return value if value > 0 else int(table.BY_NAME[name].default)


async def _authorised(request: Request) -> JSONResponse | None:
    """None when the request carries a live token, else the refusal to send."""
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else None
    try:
        await to_thread.run_sync(tokens.verify, _store(), token)
    except tokens.Refused as e:
        return _refuse(401 if token is None else 403, str(e), "make one on the server with `compilewatch token add NAME`")
    return None


def _too_large() -> JSONResponse:
    max_mb = _cap("push_max_mb")
    return _refuse(413, f"the push is larger than this server's {max_mb:,} MiB cap",
                   f"push fewer bundles at a time, or raise {table.BY_NAME['push_max_mb'].env} on the server")


def _too_many(files: int) -> JSONResponse:
    max_files = _cap("push_max_files")
    return _refuse(413, f"the push holds {files:,} files, more than this server's cap of {max_files:,}",
                   f"push fewer bundles at a time, or raise {table.BY_NAME['push_max_files'].env} on the server")


async def preflight(request: Request) -> JSONResponse:
    """GET /api/push?size=BYTES&files=N: whether a push of that size and file count would be taken,
    asked before its body is sent. A server that refuses a body it has not read closes the
    connection on a client still sending, which then sees a broken pipe instead of the reason."""
    refused = await _authorised(request)
    if refused is not None:
        return refused
    try:
        size, files = int(request.query_params.get("size", 0)), int(request.query_params.get("files", 0))
    except ValueError:
        return _refuse(400, "size and files are whole numbers")
    if size > _cap("push_max_mb") * 2**20:
        return _too_large()
    if files > _cap("push_max_files"):
        return _too_many(files)
    return JSONResponse({"ok": True})


async def push(request: Request) -> JSONResponse:
    refused = await _authorised(request)
    if refused is not None:
        return refused
    cap = _cap("push_max_mb") * 2**20
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        return _too_large()
    store = _store()
    staged = store.tmp_dir / f"push-{uuid.uuid4().hex}.part"
    sha, size = hashlib.sha256(), 0
    try:
        with open(staged, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > cap:
                    staged.unlink(missing_ok=True)
                    return _too_large()
                sha.update(chunk)
                out.write(chunk)
    except ClientDisconnect:      # the client went away mid-body: nothing of it is kept
        staged.unlink(missing_ok=True)
        return _refuse(400, "the push ended before its body did")
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    push_id = sha.hexdigest()[:32]
    name = ENTRY.format(push_id)
    inbox = queue.for_store(store)   # a folder, or a prefix of the store's object storage
    state = inbox.entry_state(name)
    if state == queue.SETTLED and not (inbox.read_receipt(name) or {}).get("ok", True):
        # the same bytes as a push that failed: taken again, since what failed may have been the
        # server (a full disk, a store that was down); a file that cannot be read fails again
        inbox.clear_receipt(name)
        state = None
    if state is None:
        try:
            files = await to_thread.run_sync(lambda: check_tar(staged, Budget(), display="the push"))
        except ArchiveError as e:
            staged.unlink(missing_ok=True)
            return _refuse(422, e.title, e.hint)
        if files > _cap("push_max_files"):
            staged.unlink(missing_ok=True)
            return _too_many(files)
        if not files:
            staged.unlink(missing_ok=True)
            return _refuse(422, "the push holds no file", "push bundles, bundle folders or log files")
        queued = inbox.enqueue(staged, name)
    else:
        staged.unlink(missing_ok=True)
        queued = False
    body = _status(request, store, push_id)
    body["duplicate_push"] = not queued
    return JSONResponse(body, status_code=202 if queued else 200)


async def push_status(request: Request) -> JSONResponse:
    refused = await _authorised(request)
    if refused is not None:
        return refused
    push_id = request.path_params["push_id"]
    if not (len(push_id) == 32 and all(c in "0123456789abcdef" for c in push_id)):
        return _refuse(404, f"no push {push_id!r} on this server", "a push id is 32 hex digits, as push printed it")
    body = _status(request, _store(), push_id)
    if body["state"] is None:
        return _refuse(404, f"no push {push_id} on this server (never received, or its receipt was cleared)")
    return JSONResponse(body)


def _status(request: Request, store, push_id: str) -> dict:
    """A push's state and, once ingested, its receipt: the runs it holds (each with a link to its
    Run detail page), its duplicates and its failures."""
    name = ENTRY.format(push_id)
    inbox = queue.for_store(store)
    state = inbox.entry_state(name)
    body = {"push": push_id, "state": state, "url": f"{_base(request)}/api/push/{push_id}"}
    receipt = inbox.read_receipt(name) if state == queue.SETTLED else None
    if receipt is None:
        return body
    # names as the pusher gave them, not under the inbox entry the push was unpacked from
    files = [{**f, "name": f["name"].removeprefix(f"{name}/")} for f in receipt["files"]]
    runs: dict[str, dict] = {}
    for f in files:
        if f.get("run_id"):
            run = runs.setdefault(f["run_id"], {"run_id": f["run_id"], "stored": 0, "duplicate": 0,
                                                "url": f"{_base(request)}/{RUN_PAGE}?run={quote(f['run_id'], safe='')}"})
            if f["status"] in ("stored", "partial"):
                run["stored"] += 1
            elif f["status"] == "duplicate":
                run["duplicate"] += 1
    body.update({
        "runs": list(runs.values()),
        "stored": sum(f["status"] in ("stored", "partial") for f in files),
        "duplicates": [{"file": f["name"], "run_id": f.get("run_id")} for f in files if f["status"] == "duplicate"],
        "failures": [{"file": f["name"], "message": f["message"]} for f in files if f["status"] == "failed"],
        "files": files,
    })
    return body


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def check(request: Request) -> JSONResponse:
    """The review of the runs named (the candidate) against a baseline SPEC, as `compilewatch check`
    prints it: its lines, whether it failed, and the JSON of `check --json`."""
    refused = await _authorised(request)
    if refused is not None:
        return refused
    try:
        asked = json.loads(await request.body() or b"{}")
        runs, baseline = list(asked.get("runs") or []), list(asked.get("baseline") or [])
        if not runs or not all(isinstance(r, str) and r and "," not in r and "=" not in r for r in runs):
            raise ValueError
    except (ValueError, TypeError, AttributeError):
        return _refuse(400, "a check names the pushed runs: a JSON body {\"runs\": [run ids], \"baseline\": [SPEC, ...]}")
    if not baseline:
        return _refuse(400, "a check needs --baseline SPEC", "e.g. --baseline label=main")

    def review() -> dict:
        from compilewatch.review.gate import closing_line, run_review, verdict_lines

        result = run_review(_store(), baseline, [",".join(f"run={r}" for r in runs)], require_sides=True)
        failed = bool(result.regressions)
        out = result.to_json()
        out["status"] = "failed" if failed else "passed"
        return {"status": out["status"], "lines": verdict_lines(result) + [closing_line(result, failed)], "review": out}
    try:
        return JSONResponse(json.loads(json.dumps(await to_thread.run_sync(review), default=str)))
    except CompileWatchError as e:
        return _refuse(400, e.title, e.hint)


ROUTES = [
    Route("/api/push", push, methods=["POST"]),
    Route("/api/push", preflight, methods=["GET"]),
    Route("/api/push/{push_id}", push_status, methods=["GET"]),
    Route("/api/check", check, methods=["POST"]),
]
