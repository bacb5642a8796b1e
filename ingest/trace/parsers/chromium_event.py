"""``chromium_event``: Chrome trace events from ``dynamo_timed`` (2.5+), payload JSON with name, ts (us),
ph ("B"/"E" begin/end, "X" complete with dur, "i" instant). Begin/end pairs become ``compile_phases``
rows with the begin's line and start and duration_us = end.ts - begin.ts."""
from __future__ import annotations

import orjson

from compilewatch.ingest.trace.parsers._util import load_json


def _args_compile_id(ev):
    args = ev.get("args")
    if isinstance(args, dict):
        cid = args.get("compile_id")
        if isinstance(cid, str) and cid not in ("None", ""):
            return cid
    return None


def _fields(ev):
    """What parse reads of one event: (ph, ts, name, args' compile id, pid, tid, dur), or () when
    it is not an event with a time and a name."""
    if not isinstance(ev, dict):
        return ()
    ts = ev.get("ts")
    name = ev.get("name")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not isinstance(name, str):
        return ()
    return ev.get("ph"), ts, name, _args_compile_id(ev), ev.get("pid"), ev.get("tid"), ev.get("dur")


def prepare(env):
    """The event's fields from its payload JSON, or None (not JSON orjson reads: parse decides
    what to report). Needs nothing but the envelope: done by the process that read it when the
    trace is read in ranges, so that only these few values travel, not the pretty-printed JSON."""
    if env.payload_bytes is None:
        return None
    try:
        return _fields(orjson.loads(env.payload_bytes))
    except orjson.JSONDecodeError:
        return None


def parse(env, ctx) -> None:
    fields = env.prepared
    if fields is None:
        fields = _fields(load_json(env, ctx))
    if not fields:
        return
    ph, ts, name, args_cid, pid, tid, dur = fields
    # Pair on torch's own id string from args (no attempt: a span may open and close in different
    # attempts); the row keeps the envelope's id in our compile_id format ("!0/-/-", not torch's "!0")
    cid = env.compile_id or args_cid
    key = (pid, tid, name, args_cid or cid, env.rank)
    if ph == "B":
        ctx.push_span(key, (ts, env.line_no, cid))
    elif ph == "E":
        begin = ctx.pop_span(key)
        if begin is None:
            return
        start, line_no, begin_cid = begin
        ctx.sink.row("compile_phases", {"line_no": line_no, "compile_id": begin_cid, "rank": env.rank,
                                        "name": name, "start_us": int(start), "duration_us": int(round(ts - start))})
    elif ph == "X":
        if isinstance(dur, (int, float)) and not isinstance(dur, bool):
            ctx.sink.row("compile_phases", {"line_no": env.line_no, "compile_id": cid, "rank": env.rank,
                                            "name": name, "start_us": int(ts), "duration_us": int(round(dur))})
