"""``compilation_metrics``: one per frame compile (written when the compile ends, after its last
attempt). Gives the ``compiles`` row, a ``recompiles`` row for every compile of a frame after its first
(frame_compile_id > 0), graph breaks from ``restart_reasons`` when no ``dynamo_graph_break_reason``
artifact covered that compile, and a ``limit_hits`` row when the compile failed on a recompile /
cache-size limit (2.6+ record it as fail_type Unsupported, reason "Dynamo recompile limit exceeded ...
exceeding the recompile_limit cache size limit (currently set to 8)")."""
from __future__ import annotations

import hashlib
import json
import re

from compilewatch.ingest.formats import recompile_limit
from compilewatch.ingest.formats.graph_break import is_break
from compilewatch.ingest.trace.envelope import format_compile_id
from compilewatch.ingest.trace.parsers._util import as_float, as_int, as_str
from compilewatch.ingest.trace.parsers.graph_break import break_row, parse_reason

_INT_FIELDS = ("co_firstlineno", "guard_count", "shape_env_guard_count", "graph_op_count", "graph_node_count",
               "graph_input_count", "cache_size", "accumulated_cache_size", "fail_user_frame_lineno")
_FLOAT_FIELDS = ("start_time", "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s",
                 "code_gen_time_s")
_STR_FIELDS = ("co_name", "co_filename", "fail_reason", "fail_user_frame_filename", "recompile_reason")
# 2.6+ time the phases in microseconds (`*_cumulative_compile_time_us`) and some builds drop the
# older `_s` fields: a missing seconds field is taken from its microseconds twin.
_US_TWINS = {"entire_frame_compile_time_s": "dynamo_cumulative_compile_time_us",
             "backend_compile_time_s": "aot_autograd_cumulative_compile_time_us",
             "inductor_compile_time_s": "inductor_cumulative_compile_time_us",
             "code_gen_time_s": "inductor_code_gen_cumulative_compile_time_us"}
_COMPILE_ID = re.compile(r"(?:!(\d+)/)?(\d+|-)/(\d+|-)(?:_(\d+))?\Z")
_CLASS_REPR = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>\Z")
_LIMIT = recompile_limit.NAME
_LIMIT_VALUE = re.compile(r"currently set to (\d+)|\((\d+)\)")


def _metrics_json(m: dict) -> str:
    # 2.5+ repeat the whole inductor/dynamo/functorch config (30+ KB) in every compile's metrics.
    # Stored verbatim that is 20 KB a row and most of a team's database; a digest still shows when
    # a config changed between compiles or runs, and the raw file keeps the full text.
    slim = {}
    for k, v in m.items():
        if k.endswith("_config") and isinstance(v, str) and len(v) > 512:
            v = "sha1:" + hashlib.sha1(v.encode("utf-8", "replace")).hexdigest()
        slim[k] = v
    return json.dumps(slim, default=repr)


def compile_ids(env, m) -> tuple:
    """(compiled_autograd_id, frame_id, frame_compile_id, attempt) of a metrics record: the
    envelope's, else the string compile_id inside the metrics (runtime and older records)."""
    ids = (env.compiled_autograd_id, env.frame_id, env.frame_compile_id, env.attempt)
    if env.frame_id is None and isinstance(m.get("compile_id"), str):
        mm = _COMPILE_ID.match(m["compile_id"])
        if mm:
            ids = tuple(None if g in (None, "-") else int(g) for g in mm.groups())
    return ids


def parse(env, ctx) -> None:
    m = env.value
    if not isinstance(m, dict):
        ctx.error(env.line_no, "json", "compilation_metrics value is not a JSON object", str(m)[:200])
        return
    ca, frame_id, fci, attempt = compile_ids(env, m)
    compile_id = format_compile_id(ca, frame_id, fci, attempt)
    rank = env.rank
    restarts = _restart_reasons(m)
    row = {"line_no": env.line_no, "compile_id": compile_id, "frame_id": frame_id, "frame_compile_id": fci,
           "attempt": attempt, "compiled_autograd_id": ca, "rank": rank, **_metrics(m),
           "restart_reasons": None if restarts is None else json.dumps(restarts), "is_recompile": bool(fci)}
    autotune_us = as_float(m.get("compile_time_autotune_time_us"))
    row["autotune_time_s"] = None if autotune_us is None else autotune_us / 1e6
    row["metrics_json"] = _metrics_json(m)
    ctx.sink.row("compiles", row)

    key = (rank, ca, frame_id, fci)
    ctx.started.pop(key, None)
    co_name = _function(ctx, row["co_name"], (rank, ca, frame_id), fci)
    # compilation_metrics closes its compile: the joins keyed by compile id are consumed here, since
    # one file can hold several sessions that reuse the same ids (tlparse's cache_hit_miss.log)
    no = ctx.recompile_nos.pop(key, None)
    artifact_reason = ctx.recompile_reasons.pop(key, None)
    covered = key in ctx.break_artifacts
    ctx.break_artifacts.discard(key)
    if fci:
        no = ctx.next_recompile_no() if no is None else no
        ctx.sink.row("recompiles", _recompile(env, row, co_name, no, row["recompile_reason"] or artifact_reason))
    if restarts and not covered:
        for reason in _break_reasons(restarts):
            ctx.sink.row("graph_breaks", break_row(env.line_no, compile_id, rank, "trace_restart", reason,
                                                   parse_reason(reason), None, None, None, None, False))
    hit = _limit_hit(env, row, co_name)
    if hit is not None:
        ctx.sink.row("limit_hits", hit)


def _metrics(m: dict) -> dict:
    """The compiles columns read from the metrics (a missing seconds field from its microseconds
    twin), and the failure type."""
    row = {}
    for k in _INT_FIELDS:
        row[k] = as_int(m.get(k))
    for k in _FLOAT_FIELDS:
        row[k] = as_float(m.get(k))
        if row[k] is None and k in _US_TWINS:
            us = as_float(m.get(_US_TWINS[k]))
            row[k] = None if us is None else us / 1e6
    row["guard_latency_us"] = as_float(m.get("guard_latency_us"))
    row["num_graph_breaks"] = as_int(m.get("num_graph_breaks"))
    for k in _STR_FIELDS:
        v = m.get(k)
        row[k] = v if isinstance(v, str) else as_str(v)
    fail_type = m.get("fail_type")
    if fail_type is not None:
        fail_type = str(fail_type)
        # 2.3/2.4 logged "<class 'torch._dynamo.exc.BackendCompilerFailed'>", 2.5+ the bare name:
        # keep the bare name so failures group across versions
        cm = _CLASS_REPR.match(fail_type)
        if cm:
            fail_type = cm.group(1)
    row["fail_type"] = fail_type
    return row


def _restart_reasons(m: dict) -> list[str] | None:
    restarts = m.get("restart_reasons")
    if isinstance(restarts, (list, tuple)):
        return [str(r) for r in restarts]
    return None if restarts is None else [str(restarts)]


def _function(ctx, co_name: str | None, frame: tuple, fci) -> str | None:
    """The compiled function's name, remembered per frame: a compile that failed early (e.g. on
    the recompile limit) logs co_name null, and the frame's earlier compiles name it."""
    _, _, frame_id = frame
    if co_name and frame_id is not None:
        if not fci:
            ctx.frame_functions[frame] = co_name  # a new session may reuse frame ids
        else:
            ctx.frame_functions.setdefault(frame, co_name)
    elif frame_id is not None:
        co_name = ctx.frame_functions.get(frame)
    return co_name


def _recompile(env, row: dict, co_name: str | None, no: int, reason: str | None) -> dict:
    """The recompiles row of a frame's compile after its first."""
    if reason:
        reason = reason.split("\nUser stack trace:", 1)[0].strip()
    return {"line_no": env.line_no, "recompile_no": no, "compile_id": row["compile_id"], "rank": row["rank"],
            "function": co_name, "file": row["co_filename"], "line": row["co_firstlineno"],
            "ts": row["start_time"], "reason": reason, "source": "trace"}


def _break_reasons(restarts: list[str]):
    """The restart reasons that are graph breaks, each once."""
    seen = set()
    for reason in restarts:
        if not reason.strip() or reason in seen or not is_break(reason):
            continue
        seen.add(reason)
        yield reason


def _limit_hit(env, row: dict, co_name: str | None) -> dict | None:
    """The limit_hits row of a compile that failed on a recompile / cache-size limit, or None."""
    fail_reason = row["fail_reason"]
    if not fail_reason or "limit" not in fail_reason:
        return None
    lm = _LIMIT.search(fail_reason)
    if not lm or not re.search(r"exceeded|reached|\bhit\b", fail_reason):
        return None
    vm = _LIMIT_VALUE.search(fail_reason)
    return {"line_no": env.line_no, "compile_id": row["compile_id"], "rank": row["rank"], "limit_name": lm.group(1),
            "limit_value": int(vm.group(1) or vm.group(2)) if vm else None, "function": co_name,
            "file": row["co_filename"], "line": row["co_firstlineno"], "reason": fail_reason}
