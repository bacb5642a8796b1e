"""Helpers shared by the text parsers: stack frames, rows' common columns."""
from __future__ import annotations

import re

# '  File "/path/x.py", line 12, in forward'  (traceback.format_list); Windows paths too
FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?\s*$')


def frames(lines) -> list[tuple[str, int, str | None]]:
    out = []
    search = FRAME.search
    for ln in lines:
        at = ln.find('File "')
        if at >= 0:
            m = search(ln, at)
            if m:
                file, line, fn = m.groups()
                out.append((file, int(line), fn))
    return out


def format_stack(fr) -> str:
    return "\n".join(f"{f}:{ln} in {fn}" if fn else f"{f}:{ln}" for f, ln, fn in fr)


def base_row(rec) -> dict:
    return {"line_no": rec.start_line, "compile_id": rec.compile_id, "rank": rec.rank}
