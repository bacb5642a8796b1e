"""The contract between parsers and the store, and between a reader and its parsers.

A parser never touches DuckDB: it calls ``sink.row(table, {...})`` with keys that are columns of
that table in ``store/migrations/*.sql`` (run_id and file_id are filled in by the pipeline), and
``sink.error(line_no, kind, message, excerpt)`` for anything it could not parse. The pipeline
stages rows for the store; ``summarize`` counts them; tests collect them.

Both line readers (TORCH_TRACE: ``ingest/trace``, TORCH_LOGS text: ``ingest/text``) hand each log
record to the ``Parser`` objects their registry lists (``default_parsers()`` in
``trace/parsers/__init__.py`` and ``text/registry.py``), as tlparse does.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

EVENT_TABLES = (
    "compiles",
    "graph_breaks",
    "recompiles",
    "guard_failures",
    "limit_hits",
    "compile_phases",
    "later_compile_metrics",
    "cache_events",
    "cache_key_components",
    "cudagraph_events",
    "step_timings",
    "timing_summaries",
    "bench_results",
    "artifacts",
    "piecewise_compiles",
    "run_settings",
    "host_probes",
)

def moved_line(line_no: int, offset: int) -> int:
    """An error's line number moved on by `offset`, the lines before a range of a file parsed in
    ranges (ingest/text_ranges.py); line 0, an error of no line, stays 0."""
    return line_no + offset if line_no else line_no


# Error kinds, after tlparse's Stats: each is counted separately and listed with file + line.
ERROR_KINDS = (
    "glog",          # a line that should carry a glog prefix and doesn't
    "json",          # envelope JSON that does not decode
    "payload",       # payload lines missing or malformed
    "payload_md5",   # payload present but its md5 does not match has_payload
    "encoding",      # bytes that are not UTF-8 (decoded with replacement, still parsed)
    "binary",        # NUL bytes / garbage
    "truncated",     # file ends inside a record
    "unknown_format",
    "io",
    "internal",      # a parser raised: a bug in compilewatch, reported with the file kept
)


class Sink(Protocol):
    def row(self, table: str, row: dict) -> None: ...

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None: ...

    def meta(self, key: str, value) -> None:
        """Run-level facts found in a log, e.g. ("torch_version", "2.5.1")."""


@dataclass(frozen=True)
class Parser:
    """One parser for one kind of log record. ``parse(record, ctx)`` reads one record (a trace
    Envelope, or a text reader's Record) and emits rows through ``ctx.sink.row`` and what it cannot
    read through ``ctx.error(line_no, kind, message, excerpt)``; ``ctx`` is the reader's per-file
    state. A parser that raises costs its reader that one record, never the file. ``finish(ctx)``
    runs once at the end of the file.

    Which records it is given: TORCH_TRACE parsers by ``event``, the envelope's key (for
    ``"artifact"`` envelopes, the artifact names in ``artifacts``; none: every artifact);
    TORCH_LOGS text parsers by ``starts(message)``, on the first line of each record.

    ``component``: the TORCH_LOGS component whose records a text parser reads (None: records torch
    logs without one being asked for, as warnings); the collector's default TORCH_LOGS is every
    component a parser names (collectors/torch_logs.py), so a new parser extends it.

    ``prepare(record)``, when given, is the part of ``parse`` that needs nothing but the record: it
    returns what ``parse`` then reads from ``record.prepared`` instead (None: leave it all to
    ``parse``), and may run in the process that read the record (ingest/trace_ranges.py)."""

    name: str
    parse: Callable[[Any, Any], None]
    event: str | None = None
    artifacts: tuple[str, ...] = ()
    starts: Callable[[str], bool] | None = None
    finish: Callable[[Any], None] | None = None
    prepare: Callable[[Any], Any] | None = None
    component: str | None = None


class CollectingSink:
    """Keeps everything in memory: for tests, summarize on small inputs, and golden files."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = defaultdict(list)
        self.errors: list[dict] = []
        self.metadata: dict = {}

    def row(self, table: str, row: dict) -> None:
        self.rows[table].append(row)

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.errors.append({"line_no": line_no, "kind": kind, "message": message, "excerpt": excerpt[:300]})

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)


class CountingSink:
    """Counts rows per table and errors and keeps nothing: the cheapest sink, for measuring a
    parser alone (benchmarks) or counting huge inputs."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.errors = 0

    def row(self, table: str, row: dict) -> None:
        self.rows[table] = self.rows.get(table, 0) + 1

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.errors += 1

    def meta(self, key: str, value) -> None:
        pass
