"""``dynamo_start``: a frame compile begins. Remembered so that a compile that never reaches its
``compilation_metrics`` (a crash, a truncated log, or the oldest 2024 traces that have no metrics at
all) still gets a ``compiles`` row when the file ends."""
from __future__ import annotations

from compilewatch.ingest.trace.parsers._util import as_int


def parse(env, ctx) -> None:
    if env.frame_id is None:
        return
    stack = env.value.get("stack") if isinstance(env.value, dict) else None
    name = filename = line = None
    if isinstance(stack, list) and stack and isinstance(stack[-1], dict):
        top = stack[-1]
        name = top.get("name") if isinstance(top.get("name"), str) else None
        filename = ctx.intern(top.get("filename"))
        line = as_int(top.get("line"))
    key = env.frame_key
    if key not in ctx.started:
        ctx.started[key] = (env.line_no, env, name, filename, line)
    fkey = (env.rank, env.compiled_autograd_id, env.frame_id)
    if name and (not env.frame_compile_id or fkey not in ctx.frame_functions):
        ctx.frame_functions[fkey] = name


def finish(ctx) -> None:
    for key, (line_no, env, name, filename, line) in ctx.started.items():
        ctx.sink.row("compiles", {
            "line_no": line_no,
            "compile_id": env.compile_id,
            "frame_id": env.frame_id,
            "frame_compile_id": env.frame_compile_id,
            "attempt": env.attempt,
            "compiled_autograd_id": env.compiled_autograd_id,
            "rank": env.rank,
            "co_name": name,
            "co_filename": filename,
            "co_firstlineno": line,
            "is_recompile": bool(env.frame_compile_id),
        })
        if env.frame_compile_id:
            # still a compile of the frame after its first, even if it never finished
            no = ctx.recompile_nos.pop(key, None) or ctx.next_recompile_no()
            reason = ctx.recompile_reasons.pop(key, None)
            ctx.sink.row("recompiles", {
                "line_no": line_no, "recompile_no": no, "compile_id": env.compile_id, "rank": env.rank,
                "function": name, "file": filename, "line": line, "ts": None,
                "reason": reason.split("\nUser stack trace:", 1)[0].strip() if reason else None,
                "source": "trace",
            })
    ctx.started.clear()
