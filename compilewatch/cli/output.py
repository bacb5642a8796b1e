"""What the command line prints: rich tables and progress, with log content made safe first.

File names, archive members, function names and reasons come from logs and uploads: an escape
sequence in them must not reach the terminal (screen clears, title changes, fake prompts). Every
such value goes through ``safe`` (control characters shown as ``\\xNN``) and into a rich ``Text``,
so rich never reads it as markup either.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from compilewatch.core import safetext

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# rich is imported where a table or a bar is made, not with the CLI: its modules are ~5 MB of
# resident memory that `ingest` would otherwise carry through its peak (the DuckDB load), and
# the result table is printed after it.

# Not a terminal (CI logs, pipes): wide enough that a line of the table stays one line to grep.
_PIPE_WIDTH = 200


def safe(value) -> str:
    """`value` as text with every control character (ESC, BEL, CR, newline, C1) written as \\xNN."""
    return safetext.plain(value, lines=False)


def safe_block(value) -> str:
    """Many lines of log content for the terminal: newlines kept, every other control character shown."""
    return safetext.plain(value, lines=True)


def console(stderr: bool = False) -> Console:
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else _PIPE_WIDTH, highlight=False, soft_wrap=False)


def table(headers: list[str], rows: list[list], *, wrap: tuple[str, ...] = ()) -> Table:
    """A plain table; every cell made safe. Columns named in `wrap` fold instead of widening."""
    from rich.table import Table
    from rich.text import Text
    t = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for h in headers:
        # a folded column keeps room for a path's last parts; the others take what they need
        t.add_column(h, overflow="fold" if h in wrap else "ellipsis", no_wrap=h not in wrap,
                     max_width=80 if h in wrap else None, min_width=24 if h in wrap else None)
    for r in rows:
        t.add_row(*(Text(safe(v)) for v in r))
    return t


def render(t: Table) -> str:
    """A table as text, for commands that print it among other lines."""
    from rich.console import Console
    c = Console(width=console().width, highlight=False, soft_wrap=False, record=True, file=_Discard())
    c.print(t)
    # rich pads each line to the table's width: in a CI log or a pipe that is trailing blanks by the KB
    return "\n".join(line.rstrip() for line in c.export_text().rstrip("\n").splitlines())


class _Discard:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def say(text: str, *, err: bool = False) -> None:
    """One line of our own words around log content that is already made safe."""
    print(text, file=sys.stderr if err else sys.stdout, flush=err)


class IngestProgress:
    """A rich progress bar on stderr: bytes done of the total, speed, the current file. Silent
    when stderr is not a terminal. Call with (bytes done, bytes total, current file name)."""

    def __init__(self, enabled: bool):
        self.progress = None
        if enabled:
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                       TransferSpeedColumn)
            self.progress = Progress(TextColumn("{task.fields[name]}", style="dim"), BarColumn(),
                                     DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                                     console=console(stderr=True), transient=True)
            self.task = self.progress.add_task("ingest", total=None, name="")

    def __call__(self, done: int, total: int, name: str) -> None:
        if self.progress is None:
            return
        self.progress.update(self.task, completed=done, total=total, name=safe(name)[-40:])

    def __enter__(self):
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()
