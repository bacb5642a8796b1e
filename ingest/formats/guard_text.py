"""The text of one failed guard, as torch prints it in a recompile reason, split into what a person
reads: the compile id it failed for, the guard expression, the user source line it came from, and
that line's location.

    2/0: warmup == 0.02          # return ce + warmup * 1e-4 * lf.mean()  # mp/team/train_llama.py:171 in lm_loss_warmup
    0/0: L['self'].act_mode == 1  # if self.act_mode == 1:  # mp/job/tiny_job.py:29 in forward (HINT: ...)
    2/2: ___as_tensor(warmup).item() == 0.06  # (unknown source ___as_tensor(warmup).item(), please file a bug)

torch pads the expression to a column before its comments and shortens the location's path to its
last characters (``mp/team/...`` for ``/tmp/team/...``); ``full_path`` restores the head from a
path the run recorded in full. The guard's key and category live in ingest/normalize.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"^\s*(?:-\s+)?(?P<entry>!?\d+/\d+(?:/\d+)?(?:_\d+)?):\s?")
# a comment starts at " # " (torch writes two spaces or the padding before the first one)
_COMMENT = re.compile(r"\s+#\s")
_LOCATION = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+) in (?P<function>[\w<>.$]+)"
                       r"(?:\s+\(HINT: (?P<hint>.*)\))?\s*$", re.S)


@dataclass(frozen=True)
class GuardText:
    compile_id: str | None     # the compile the guard belonged to ("2/0")
    expression: str            # the failed guard alone ("warmup == 0.02")
    source: str | None         # the user's source line it guards ("return ce + warmup * ...")
    file: str | None           # as torch printed it: maybe shortened to its tail
    line: int | None
    function: str | None
    hint: str | None           # torch's own "(HINT: ...)" after the location, when it gives one
    note: str | None           # any other comment ("(unknown source ..., please file a bug)")

    @property
    def location(self) -> str | None:
        """`file:line in function`, as printed (see ``full_path`` for the whole file)."""
        if not self.file:
            return None
        return f"{self.file}:{self.line} in {self.function}" if self.function else f"{self.file}:{self.line}"


def split_guard(raw: str | None) -> GuardText:
    """A failed guard's text in its parts; never raises (unrecognised text is the expression)."""
    text = (raw or "").strip()
    m = _ENTRY.match(text)
    compile_id = m.group("entry") if m else None
    rest = text[m.end():] if m else text
    parts = _COMMENT.split(rest)
    expression = parts[0].strip()
    source = file = function = hint = note = None
    line = None
    for part in (p.strip() for p in parts[1:]):
        loc = _LOCATION.match(part)
        if loc and file is None:
            file, line, function = loc.group("file"), int(loc.group("line")), loc.group("function")
            hint = loc.group("hint")
        elif part.startswith("(") and note is None:
            note = part
        elif source is None:
            source = part
        else:
            source = f"{source} # {part}"
    return GuardText(compile_id, expression, source, file, line, function, hint, note)


def full_path(printed: str | None, known: list[str] | tuple[str, ...] = ()) -> str | None:
    """The whole path of a location torch shortened to its tail: the recorded path (a recompile's
    file, a graph break's user file) that ends with what was printed, else what was printed."""
    if not printed:
        return printed
    for path in known:
        if isinstance(path, str) and path.endswith(printed) and len(path) >= len(printed):
            return path
    return printed
