"""Recompile-limit warnings (convert_frame, WARNING level, printed without TORCH_LOGS too).

    torch._dynamo hit config.recompile_limit (8)
       function: 'f' (/x.py:4)
       last reason: 0/7: L['n'] == 7
    To log all recompilation reasons, use TORCH_LOGS="recompiles".

``cache_size_limit`` / ``accumulated_cache_size_limit`` until 2.5, ``recompile_limit`` /
``accumulated_recompile_limit`` after; 2.0 printed ``reasons:  [...]`` instead of ``last reason:``.
"""
from __future__ import annotations

import ast
import re

from compilewatch.ingest.formats import recompile_limit
from compilewatch.ingest.text.common import base_row

_HEAD = recompile_limit.TEXT_HEAD
_FUNC = re.compile(r"^\s*function: '(?P<fn>.*)' \((?P<file>.*?)(?::(?P<line>\d+))?\)\s*$")
_REASON = re.compile(r"^\s*(?:last reason|reasons):\s*(?P<reason>.*)$")


def starts(msg: str) -> bool:
    return msg.startswith(recompile_limit.TEXT_STARTS)


def parse(rec, ctx) -> None:
    sink = ctx.sink
    m = _HEAD.match(rec.lines[0])
    if not m:
        ctx.error(rec.start_line, "payload", "recompile-limit warning of an unknown shape", rec.lines[0])
        return
    fn = file = line = reason = None
    for ln in rec.lines[1:]:
        f = _FUNC.match(ln)
        if f and fn is None:
            fn, file = f.group("fn"), f.group("file")
            line = int(f.group("line")) if f.group("line") else None
            continue
        r = _REASON.match(ln)
        if r and reason is None:
            reason = _unlist(r.group("reason").strip())
    row = base_row(rec)
    row.update(limit_name=m.group("name"), limit_value=int(m.group("value")),
               function=fn, file=file, line=line, reason=reason)
    sink.row("limit_hits", row)


def _unlist(reason: str) -> str:
    """2.0 printed ``reasons:  ["..."]``: keep the (last) reason itself."""
    if reason.startswith("[") and reason.endswith("]"):
        try:
            items = ast.literal_eval(reason)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return reason
        if isinstance(items, list) and items:
            last = items[-1]
            return str(last[-1] if isinstance(last, list) and last else last)
    return reason
