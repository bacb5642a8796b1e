"""Graph-break records, every shape torch has printed them in.

- 2.1-2.3   ``Graph break: <reason> from user code at:`` + user stack
- 2.3-2.4   ``Graph break: from user code at:`` + user stack + ``Traceback ...`` whose last
            exception line (``torch._dynamo.exc.Unsupported: <reason>``) is the reason
- 2.3-2.4   ``Graph break: skip: from user code at:`` (the whole frame falls back to eager)
- 2.5-2.6   ``Graph break in user code at F:L`` + ``Reason: Unsupported: ...`` + ``User code traceback:``
- 2.7+      ``Graph break in user code at F:L`` + ``Graph Break Reason: ...`` with
            ``<gb_type>`` / ``Explanation:`` / ``Hint:`` / ``Developer debug context:`` / gbNNNN link,
            ``Stack variable source attribution:``, ``User code traceback:``; the duplicate form
            ``Graph break (user stack suppressed due to duplicate graph break) in user code at F:L``;
            nested ``*** While handling this graph break, another graph break occurred: ***``
- 2.12+     ``Graph break: torch.compile cannot properly resume from this graph break, which
            results in a skip.`` + ``The graph break occurred in the following user code:``
"""
from __future__ import annotations

import re

from compilewatch.ingest.formats.graph_break import is_nested, parse_reason
from compilewatch.ingest.normalize import graph_break_key, normalize_reason
from compilewatch.ingest.text.common import base_row, format_stack, frames

# the line may be unreadable ("test_x.py:N" in PyTorch's own test expectations): kept, as unknown
_IN_USER_CODE = re.compile(r"^Graph break(?P<dup> \((?:user stack|details) suppressed[^)]*\))? in user code at (?P<file>.*):(?P<line>\w+)\s*$")
_OLD_FORM = re.compile(r"^Graph break: (?P<reason>.*?)\s*from user code at:?\s*(?P<rest>.*)$", re.S)
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(?:Unsupported|[A-Z]\w*(?:Error|Exception|Unsupported))(?:: (?P<msg>.*))?$")
_ITEM_WARNING_SOURCE = re.compile(r"_dynamo[/\\]variables[/\\]tensor\.py:\d+\]")
_SECTION_END = ("User code traceback:", "Stack variable source attribution:")


def starts(msg: str) -> bool:
    # not bare "Graph break": 2.7+ gb_types such as "Graph break under GenericContextWrappingVariable"
    # appear as lines inside a reason
    return msg.startswith(("Graph break: ", "Graph break in user code at ", "Graph break ("))


def parse(rec, ctx) -> None:
    head = rec.lines[0]
    if rec.prefix and _ITEM_WARNING_SOURCE.search(rec.prefix) and head.startswith("Graph break: from user code at"):
        # The tail of tensor.py's "Graph break from `Tensor.item()`, consider setting: ..." warning
        # (2.5+). It precedes the [__graph_breaks] record of the same break, which carries the
        # reason; counting both would report every .item() break twice (seen in torch 2.11 logs).
        return
    found = _read(rec.lines)
    if found is None:
        ctx.error(rec.start_line, "payload", "graph-break record of an unknown shape", head)
        return
    reason, fr, user_file, user_line = found
    if reason is None and not fr and user_file is None:
        ctx.error(rec.start_line, "payload", "graph-break record without reason or location", head)
        return
    ctx.sink.row("graph_breaks", _row(rec, reason, fr, user_file, user_line))


def _read(lines) -> tuple | None:
    """(reason, stack frames, user file, user line) from whichever shape the record has (module
    docstring); None for a record of no known shape."""
    head = lines[0]
    m = _IN_USER_CODE.match(head)
    if m:
        user_file, user_line = m.group("file"), int(m.group("line")) if m.group("line").isdigit() else None
        reason_lines, rest = _reason_block(lines[1:])
        if "User code traceback:" in rest:
            rest = rest[rest.index("User code traceback:") + 1:]
        reason = "\n".join(reason_lines).strip() or _exception_reason(rest)
        return reason, frames(_before_traceback(rest)), user_file, user_line
    if head.startswith("Graph break: torch.compile cannot properly resume"):
        body = lines[1:]
        reason = _exception_reason(body) or "skip: " + head[len("Graph break: "):].strip()
        return reason, frames(_before_traceback(body)), None, None
    text = "\n".join(lines)
    m = _OLD_FORM.match(text)
    if m:
        reason = m.group("reason").strip()
        if reason in ("", "skip:"):
            reason = ((reason + " ") if reason else "") + (_exception_reason(lines) or "")
            reason = reason.strip() or None
        return reason, frames(_before_traceback(lines)), None, None
    if head.startswith("Graph break: "):
        # "Graph break: <reason>" without a user stack (some 2.x paths log only the reason)
        return text[len("Graph break: "):].strip(), frames(_before_traceback(lines[1:])), None, None
    return None


def _row(rec, reason: str | None, fr: list, user_file: str | None, user_line: int | None) -> dict:
    """The graph_breaks row: the reason's parts (2.7+ gb_type, explanation, hints, registry code),
    the user's frame and the break's key."""
    gb_type = explanation = hints = gb_code = None
    nested = is_nested(reason)
    if reason:
        parts = parse_reason(reason)
        gb_type, explanation, hints, gb_code = parts.gb_type, parts.explanation, parts.hints_json, parts.gb_code
        if reason.startswith("Reason: "):
            reason = reason[len("Reason: "):]
    user_file, user_line, user_function = _user_frame(fr, user_file, user_line)
    row = base_row(rec)
    row.update(
        source="text",
        gb_type=gb_type,
        gb_code=gb_code,
        reason=reason,
        # A 2.7+ structured break is named by its gb_type, as the trace parser names it, so the same
        # break reads the same in the dashboard whichever log it came from.
        reason_norm=normalize_reason(gb_type) if gb_type else (normalize_reason(reason)[:2000] if reason else None),
        explanation=explanation,
        hints=hints,
        user_file=user_file,
        user_line=user_line,
        user_function=user_function,
        user_stack=format_stack(fr) or None,
        nested=nested,
        break_key=graph_break_key(gb_type, reason, user_file, user_line),
    )
    return row


def _user_frame(fr: list, user_file: str | None, user_line: int | None) -> tuple:
    """(file, line, function) where the break happened in the user's code: the location the record
    names, else the innermost frame outside torch (else the innermost frame)."""
    if user_file is not None:
        for f, ln, fn in reversed(fr):
            if f == user_file and ln == user_line:
                return user_file, user_line, fn
        return user_file, user_line, None
    for frame in reversed(fr):
        if not _is_torch_internal(frame[0]):
            return frame
    return fr[-1] if fr else (None, user_line, None)


def _before_traceback(lines):
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback (most recent call last)"):
            return lines[:i]
    return lines


def _reason_block(lines):
    """Split "Graph Break Reason: ..." / "Reason: ..." text from the stack after it."""
    if not lines:
        return [], []
    first = lines[0]
    if first.startswith("Graph Break Reason: "):
        out = [first[len("Graph Break Reason: "):]]
    elif first.startswith("Reason: "):
        out = [first]
    else:
        return [], lines
    for i in range(1, len(lines)):
        ln = lines[i]
        if ln.startswith(_SECTION_END) or ln.startswith("Traceback (most recent call last)"):
            return out, lines[i:]
        out.append(ln)
    return out, []


def _exception_reason(lines) -> str | None:
    """The message of the last exception line of a traceback (the reason in 2.3-2.4 logs)."""
    if not lines:
        return None
    tb = None
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback (most recent call last)"):
            tb = i
    if tb is None:
        return None
    for j in range(len(lines) - 1, tb, -1):
        ln = lines[j]
        if ln and not ln[0].isspace():
            m = _EXC_LINE.match(ln)
            if m:
                tail = [ln2 for ln2 in lines[j + 1:]]
                # "from user code:" and what follows is context appended to the message
                for k, t in enumerate(tail):
                    if t.strip().startswith("from user code:") or t.startswith("Set TORCH_LOGS"):
                        tail = tail[:k]
                        break
                msg = "\n".join([m.group("msg") or ""] + tail).strip()
                return msg or ln
    return None


def _is_torch_internal(path: str) -> bool:
    p = path.replace("\\", "/")
    return "/torch/_dynamo/" in p or "/torch/_inductor/" in p or p.startswith("<frozen")
