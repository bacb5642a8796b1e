"""``dynamo_graph_break_reason``: one graph break, logged by symbolic_convert's
``log_graph_break`` as an artifact (2.5+) or as its own envelope key (2.4). Payload shapes:

- 2.4/2.5: ``Graph break in user code at F:L`` / ``Reason: Unsupported: <msg>`` / ``User code traceback:``
  / frames / blank / internal ``Traceback (most recent call last):``
- 2.7+:   ``Graph break in user code at F:L`` / ``Graph Break Reason: <context>:`` / blank / ``<gb_type>`` /
  ``  Explanation: ..`` / ``  Hint: ..`` (repeated) / ``  Developer debug context: ..`` /
  `` For more details about this graph break, please visit: .../gb/gb0059.html`` / ``User code traceback:``
- skip variant (convert_frame): ``Graph break: torch.compile cannot properly resume from this graph
  break, which results in a skip.`` / ``The graph break occurred in the following user code:`` / frames.

The same break also appears in that compile's ``compilation_metrics.restart_reasons``. Decided from
real logs: in our torch 2.13 trace (tests/fixtures/trace/graph_break_recompile.log.gz) every one of the
4 artifacts (at attempt 0 of compiles 0/0, 1/0, 0/1, 1/1) is repeated as the restart reason of that
compile's metrics (logged at attempt 1), and the hand-spliced tlparse log comp_metrics@5dc9d1a pairs its
2 artifacts with 2 restart reasons the same way; older logs (comp_metrics.log, 2024-04) have restart
reasons and no artifacts. So a compile (rank, compiled-autograd id, frame, frame compile, any attempt)
that has an artifact takes its breaks from the artifacts only, which carry the user file/line and
stack; restart reasons count only for compiles without one (see compilation_metrics).
"""
from __future__ import annotations

import re

from compilewatch.ingest.formats.graph_break import is_nested
from compilewatch.ingest.formats.graph_break import parse_reason as reason_parts
from compilewatch.ingest.normalize import graph_break_key, normalize_reason

_AT = re.compile(r"Graph break in user code at (.+):(\d+)\s*$", re.M)
_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (.+?)\s*$', re.M)


def parse_reason(text: str) -> dict:
    """gb_type, explanation, hints (a JSON list) and gb_code of a reason block (formats.graph_break)."""
    parts = reason_parts(text)
    return {"gb_type": parts.gb_type, "explanation": parts.explanation, "hints": parts.hints_json,
            "gb_code": parts.gb_code}


def break_row(line_no, compile_id, rank, source, reason, info, user_file, user_line, user_function, user_stack,
              nested) -> dict:
    gb_type = info.get("gb_type")
    # the number-free key text: the gb_type line when there is one, else the reason up to the details
    core = gb_type or reason.split("\n", 1)[0]
    return {
        "line_no": line_no, "compile_id": compile_id, "rank": rank, "source": source,
        "gb_type": gb_type, "gb_code": info.get("gb_code"), "reason": reason,
        "reason_norm": normalize_reason(core), "explanation": info.get("explanation"), "hints": info.get("hints"),
        "user_file": user_file, "user_line": user_line, "user_function": user_function, "user_stack": user_stack,
        "nested": nested, "break_key": graph_break_key(gb_type, core, user_file, user_line),
    }


def _section(text: str, start: str, stops: tuple) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    body = text[i + len(start):]
    end = len(body)
    for stop in stops:
        j = body.find(stop)
        if 0 <= j < end:
            end = j
    return body[:end]


def parse(env, ctx) -> None:
    text = env.payload
    if not text:
        return
    ctx.break_artifacts.add(env.frame_key)
    user_file = user_line = None
    m = _AT.search(text)
    if m:
        user_file, user_line = m.group(1), int(m.group(2))
    # reason: between the "Reason:" line and the user traceback
    reason = None
    for marker in ("Graph Break Reason: ", "\nReason: "):
        sec = _section(text, marker, ("\nUser code traceback:", "\nTraceback (most recent call last)"))
        if sec is not None:
            reason = sec.strip()
            break
    if reason is None:
        head = _section(text, "Graph break: ", ("\nThe graph break occurred", "\nTraceback (most recent call last)"))
        reason = (head or text.split("\n", 1)[0]).strip()
    stack = _section(text, "User code traceback:\n", ("\nTraceback (most recent call last)",))
    if stack is None:
        stack = _section(text, "The graph break occurred in the following user code:\n",
                         ("\nTraceback (most recent call last)",))
    user_function = None
    if stack is not None:
        stack = stack.rstrip()
        frames = _FRAME.findall(stack)
        if frames:
            f, ln, fn = frames[-1]
            user_function = fn
            if user_file is None:
                user_file, user_line = f, int(ln)
        stack = stack or None
    info = parse_reason(reason)
    ctx.sink.row("graph_breaks", break_row(env.line_no, env.compile_id, env.rank, "trace_artifact", reason, info,
                                           user_file, user_line, user_function, stack, is_nested(text)))
