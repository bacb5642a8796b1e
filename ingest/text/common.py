"""Helpers shared by the text parsers: stack frames, rows' common columns."""
from __future__ import annotations

import re

# '  File "/path/x.py", line 12, in forward'  (traceback.format_list); Windows paths too. Matched
# over the record's lines joined, one match per line at most: no part of it matches a newline
# (the file's [^"\n], the trailing [^\S\n]), and $ is each line's end (re.M). One findall over the
# joined lines is a fifth cheaper than a search per line.
FRAME = re.compile(r'File "(?P<file>[^"\n]*)", line (?P<line>\d+)(?:, in (?P<fn>\S+))?[^\S\n]*$', re.M)


def frames(lines) -> list[tuple[str, int, str | None]]:
    return [(file, int(line), fn or None) for file, line, fn in FRAME.findall("\n".join(lines))]


def format_stack(fr) -> str:
    return "\n".join(f"{f}:{ln} in {fn}" if fn else f"{f}:{ln}" for f, ln, fn in fr)


def base_row(rec) -> dict:
    return {"line_no": rec.start_line, "compile_id": rec.compile_id, "rank": rec.rank}
