"""TORCH_LOGS text reader: ``parse_text(stream, sink)``.

``stream`` is a binary file object iterated line by line (any line ending, maybe no newline at
the end, maybe non-UTF-8 or NUL bytes). Lines are grouped into log records
(``reader.RecordAssembler``), and each record whose first line a registered parser recognises
(``registry.default_parsers()``) becomes rows: graph_breaks, recompiles + guard_failures, limit_hits, cudagraph_events.
Plain program output is skipped silently; lines that look like log records but cannot be read
are counted with ``sink.error`` and parsing goes on. Never raises on bad input.
"""
from __future__ import annotations

from compilewatch.ingest.text.reader import RecordAssembler
from compilewatch.ingest.text.registry import default_parsers, parser_for

__all__ = ["parse_text", "default_parsers"]


class TextContext:
    """Per-file state the text parsers share: the sink and the recompile numbering."""

    def __init__(self, sink):
        self.sink = sink
        self.recompile_no = 0

    def next_recompile_no(self) -> int:
        self.recompile_no += 1
        return self.recompile_no

    def error(self, line_no, kind, message, excerpt=""):
        self.sink.error(line_no, kind, message, excerpt[:300] if excerpt else "")


def parse_text(stream, sink, text_only: bool = False) -> None:
    """Parse TORCH_LOGS text from ``stream`` into ``sink`` (rows, errors, and the number of log
    records recognised as meta ``log_records``). ``text_only``: only the records of facts a trace
    does not carry (registry.TEXT_ONLY), for the text log of a bundle whose trace is parsed for
    everything else."""
    asm = assembler(TextContext(sink), text_only)
    read_lines(stream, asm, 1)
    asm.close()
    sink.meta("log_records", asm.records)


def assembler(ctx: TextContext, text_only: bool = False, cls=RecordAssembler) -> RecordAssembler:
    """The record assembler of one parse, each finished record handed to its parser with `ctx`."""
    on_error = ctx.error

    def on_record(rec):
        try:
            rec.parser.parse(rec, ctx)
        except Exception as e:  # a parser bug costs one record, never the file
            on_error(rec.start_line, "payload", f"parser failed: {type(e).__name__}: {e}", rec.lines[0])

    return cls((lambda msg: parser_for(msg, True)) if text_only else parser_for, on_record, on_error)


def read_lines(stream, asm: RecordAssembler, line_no: int) -> int:
    """Feed every line of `stream` to `asm`, the first numbered `line_no`; returns the number the
    next line would have."""
    on_error = asm.on_error
    try:
        read = getattr(stream, "read", None)
        if read is not None:
            # Each chunk's whole lines are decoded where they lie (a memoryview, no copy): joining
            # the cut line onto the next chunk and slicing off the whole lines copied every MB twice,
            # half the cost of reading, decoding and splitting the file.
            pending = b""   # the start of a line cut at the end of the chunk before
            while True:
                chunk = read(_CHUNK)
                if not chunk:
                    break
                start = 0
                if pending:
                    nl = chunk.find(b"\n")
                    if nl < 0:
                        pending += chunk
                        if len(pending) > _MAX_LINE:  # no newline for megabytes: binary, or one huge line
                            line_no = _feed_block(asm, on_error, line_no, pending)
                            pending = b""
                        continue
                    start = nl + 1
                    line_no = _feed_block(asm, on_error, line_no, pending + chunk[:start])
                cut = chunk.rfind(b"\n", start)
                if cut < 0:
                    pending = chunk[start:]
                    continue
                pending = chunk[cut + 1:]
                line_no = _feed_block(asm, on_error, line_no, chunk, start, cut + 1)
            if pending:
                line_no = _feed_block(asm, on_error, line_no, pending)
        else:
            for raw in stream:
                line_no = _feed_slow(asm, on_error, line_no, raw)
    except OSError as e:
        on_error(line_no, "io", f"read failed: {e}")
    return line_no


_CHUNK = 1 << 20
_MAX_LINE = 64 << 20


def _feed_block(asm, on_error, line_no, block: bytes, start: int = 0, end: int | None = None) -> int:
    """Whole lines, block[start:end] (the last maybe without newline): decode once, feed.
    Blocks with NUL or non-UTF-8 bytes go line by line so that each bad line is counted where it is."""
    if end is None:
        end = len(block)
    if block.find(b"\x00", start, end) < 0:
        try:
            text = str(memoryview(block)[start:end], "utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            return asm.feed_text(line_no, text)
    for raw in _split_keep(block[start:end]):
        line_no = _feed_slow(asm, on_error, line_no, raw)
    return line_no


def _split_keep(block: bytes):
    start = 0
    n = len(block)
    while start < n:
        end = block.find(b"\n", start)
        if end < 0:
            yield block[start:]
            return
        yield block[start:end + 1]
        start = end + 1


def _feed_slow(asm, on_error, line_no, raw) -> int:
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
    asm.feed(line_no, s)
    return line_no + 1
