"""``recompile_reasons`` artifact (guards.py ``get_and_maybe_log_recompilation_reasons``, 2.5+): why the
frame's cached entries all failed, logged just before the recompile's dynamo_start. The payload is
one string per failed cache entry, ``"<entry compile id>: <failed guard>[\\nUser stack trace: ...]"``;
torch logs a single reason as plain text and several as a JSON list (newest entry first).
Gives one ``guard_failures`` row per listed entry."""
from __future__ import annotations

import json

from compilewatch.ingest.normalize import classify_guard_failure, strip_entry_prefix


def reasons_of(text: str) -> list[str]:
    s = text.lstrip()
    if s[:1] in ("[", '"'):
        try:
            v = json.loads(s)
        except ValueError:
            v = None
        if isinstance(v, list):
            return [str(x) for x in v]
        if isinstance(v, str):
            return [v]
    return [text]


def parse(env, ctx) -> None:
    text = env.payload
    if text is None:
        return
    key = env.frame_key
    no = ctx.recompile_nos.get(key)
    if no is None:
        no = ctx.recompile_nos[key] = ctx.next_recompile_no()
    function = ctx.frame_functions.get((env.rank, env.compiled_autograd_id, env.frame_id))
    first = None
    for reason in reasons_of(text):
        raw = reason.split("\nUser stack trace:", 1)[0].strip()
        if not raw:
            continue
        if first is None:
            first = raw
        entry, _ = strip_entry_prefix(raw)
        c = classify_guard_failure(raw)
        ctx.sink.row("guard_failures", {
            "line_no": env.line_no, "recompile_no": no, "compile_id": env.compile_id, "rank": env.rank,
            "function": function, "failed_entry": entry, "raw": raw, "category": c.get("category"),
            "guard_key": c.get("guard_key"), "source_name": c.get("source_name"), "dimension": c.get("dimension"),
            "expected": c.get("expected"), "actual": c.get("actual"),
        })
    if first is not None:
        ctx.recompile_reasons.setdefault(key, first)
