"""TORCH_LOGS text reader: ``parse_text(stream, sink)``.

``stream`` is a binary file object iterated line by line (any line ending, maybe no newline at
the end, maybe non-UTF-8 or NUL bytes). Lines are grouped into log records
(``reader.RecordAssembler``), and each record whose first line a registered parser recognises
(``registry.PARSERS``) becomes rows: graph_breaks, recompiles + guard_failures, limit_hits.
Plain program output is skipped silently; lines that look like log records but cannot be read
are counted with ``sink.error`` and parsing goes on. Never raises on bad input.
"""
from __future__ import annotations

from .reader import RecordAssembler
from .registry import PARSERS, parser_for

__all__ = ["parse_text", "PARSERS"]


class _Context:
    def __init__(self, sink):
        self.sink = sink
        self.recompile_no = 0

    def next_recompile_no(self) -> int:
        self.recompile_no += 1
        return self.recompile_no

    def error(self, line_no, kind, message, excerpt=""):
        self.sink.error(line_no, kind, message, excerpt)


def parse_text(stream, sink) -> dict:
    """Parse TORCH_LOGS text from ``stream`` into ``sink``; returns counts by table and errors."""
    ctx = _Context(sink)
    counts: dict = {}
    errors = [0]

    def on_error(line_no, kind, message, excerpt=""):
        errors[0] += 1
        sink.error(line_no, kind, message, excerpt[:300] if excerpt else "")

    class _CountingSink:
        def row(self, table, row):
            counts[table] = counts.get(table, 0) + 1
            sink.row(table, row)

        def error(self, line_no, kind, message, excerpt=""):
            on_error(line_no, kind, message, excerpt)

        def meta(self, k, v):
            sink.meta(k, v)

    counting = _CountingSink()
    ctx.sink = counting

    def on_record(rec):
        _, parser = parser_for(rec.lines[0])
        if parser is None:
            return
        try:
            parser.parse(rec, ctx, counting)
        except Exception as e:  # a parser bug costs one record, never the file
            on_error(rec.start_line, "payload", f"parser failed: {type(e).__name__}: {e}", rec.lines[0])

    asm = RecordAssembler(lambda msg: msg.startswith(_STARTS) and parser_for(msg)[1] is not None,
                          on_record, on_error)
    line_no = 0
    feed = asm.feed
    try:
        for raw in stream:
            line_no += 1
            if not isinstance(raw, (bytes, bytearray)):
                raw = str(raw).encode("utf-8", "surrogateescape")
            if b"\x00" in raw:
                on_error(line_no, "binary", "NUL bytes in line (removed)", raw[:120].decode("utf-8", "replace"))
                raw = raw.replace(b"\x00", b"")
            try:
                s = raw.decode("utf-8")
            except UnicodeDecodeError:
                s = raw.decode("utf-8", "replace")
                on_error(line_no, "encoding", "bytes that are not UTF-8 (replaced)", s[:120])
            if s.endswith("\n"):
                s = s[:-2] if s.endswith("\r\n") else s[:-1]
            elif s.endswith("\r"):
                s = s[:-1]
            feed(line_no, s)
    except OSError as e:
        on_error(line_no + 1, "io", f"read failed: {e}")
    asm.close()
    counts["errors"] = errors[0]
    return counts


from .reader import RECORD_STARTS as _STARTS  # noqa: E402
