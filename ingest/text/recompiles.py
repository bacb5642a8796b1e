"""Recompile records: one ``recompiles`` row per report, one ``guard_failures`` row per failing
guard listed in it.

- 2.0/2.1 tuple form: ``('Recompiling function f in /x.py', "triggered by the following guard
  failure: L['t'] == 0")`` (or ``failures: [...]`` with report_all_guard_failures)
- 2.1+: ``Recompiling function f in /x.py:12`` / ``    triggered by the following guard failure(s):``
  / ``    - <reason>`` lines, each ``<reason>`` prefixed by the failing cache entry's compile id
  (``- 0/3: ...``) from 2.2 on; a reason's own extra lines (``User stack trace:`` + frames,
  2.10+) are indented under it.
- recompiles_verbose: the same with ``    guard N failures:`` headers, every failing guard of
  every cache entry listed.
"""
from __future__ import annotations

import ast
import re

from compilewatch.ingest.normalize import classify_guard_failure
from compilewatch.ingest.text.common import base_row

# The file is read greedily back to a final ":<line>" when there is one, lazily to the trailing
# space when not: the same split as one lazy "(?P<file>.*?)(?::(?P<line>\d+))?\s*$", which tried
# every length of the path (4 us a header against 0.3 us).
_HEADER = re.compile(r"^Recompiling function (?P<fn>.+?) in (?:(?P<file>.*):(?P<line>\d+)\s*$|(?P<nofile>.*?)\s*$)")
_ENTRY_CHARS = str.maketrans("", "", "/!_")  # "0/3", "!0/0/1", "0/0_1": digits once these go
_GUARD_N = re.compile(r"^\s*guard \d+ failures:\s*$")
_TRIGGER = re.compile(r"triggered by the following guard failures?(?:\(s\))?:\s*(?P<rest>.*)$", re.S)


def starts(msg: str) -> bool:
    return msg.startswith("Recompiling function") or msg.startswith("('Recompiling function")


def parse(rec, ctx) -> None:
    sink = ctx.sink
    head = rec.lines[0]
    if head.startswith("("):
        parsed = _tuple_form("\n".join(rec.lines))
        if parsed is None:
            ctx.error(rec.start_line, "payload", "recompile tuple that does not parse", head)
            return
        header, failures = parsed
    else:
        header, failures = head, _failures(rec.lines)
    m = _HEADER.match(header)
    if not m:
        ctx.error(rec.start_line, "payload", "'Recompiling function' line without 'in FILE'", head)
        return
    no = ctx.next_recompile_no()
    fn, file, line, nofile = m.groups()
    row = base_row(rec)
    row.update(
        recompile_no=no,
        function=fn,
        file=file if line is not None else nofile,
        line=int(line) if line else None,
        ts=rec.ts,
        reason=failures[0][1] if failures else None,
        source="text",
    )
    sink.row("recompiles", row)
    line_nos, start, cid, rank = rec.line_nos, rec.start_line, rec.compile_id, rec.rank
    emit = sink.row
    for idx, raw, entry in failures:
        grow = {
            "line_no": line_nos[idx] if idx is not None else start,
            "recompile_no": no,
            "compile_id": cid,
            "rank": rank,
            "function": fn,
            "failed_entry": entry,
            "raw": raw,
        }
        grow.update(classify_guard_failure(raw))
        emit("guard_failures", grow)


def _failures(lines):
    """[(line index, raw reason, failed entry)] from the indented body, lines[1:] (not sliced off:
    a verbose report's list of guards is long)."""
    out = []
    entry = None
    started = False
    for i in range(1, len(lines)):
        ln = lines[i]
        s = ln.lstrip()
        if not started:
            if "triggered by the following guard failure" in s:
                started = True
            continue
        if s[:1] != "-":
            if s.startswith("guard ") and _GUARD_N.match(s):
                entry = None
            continue
        body = s[2:] if s[1:2] == " " else s[1:]
        # a reason's own continuation lines are indented under its "- "
        if not body or body[0] in " \t" or body == "User stack trace:":
            continue
        e = None
        if body[0].isdigit() or body[0] == "!":
            colon = body.find(":")
            cand = body[:colon]
            if colon > 0 and "/" in cand and cand.translate(_ENTRY_CHARS).isdigit():
                e = entry = cand
        out.append((i, body.rstrip(), e if e is not None else entry))
    return out


def _tuple_form(text: str):
    try:
        tup = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(tup, tuple) or not tup or not isinstance(tup[0], str):
        return None
    header = tup[0]
    failures = []
    for part in tup[1:]:
        if not isinstance(part, str):
            continue
        m = _TRIGGER.search(part)
        if not m:
            continue
        rest = m.group("rest").strip()
        items = None
        if rest.startswith("["):
            try:
                items = ast.literal_eval(rest)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                items = None
        if isinstance(items, list):
            failures.extend((None, str(x), None) for x in items)
        elif rest:
            failures.append((None, rest, None))
    return header, failures
