"""Helpers shared by the text parsers: stack frames, rows' common columns."""
from __future__ import annotations

import re

# '  File "/path/x.py", line 12, in forward'  (traceback.format_list); Windows paths too
FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?\s*$')


def frames(lines) -> list[tuple[str, int, str | None]]:
    out = []
    for ln in lines:
        if "File \"" in ln:
            m = FRAME.search(ln)
            if m:
                out.append((m.group("file"), int(m.group("line")), m.group("fn")))
    return out


def format_stack(fr) -> str:
    return "\n".join(f"{f}:{ln} in {fn}" if fn else f"{f}:{ln}" for f, ln, fn in fr)


def base_row(rec) -> dict:
    return {"line_no": rec.start_line, "compile_id": rec.compile_id, "rank": rec.rank}
