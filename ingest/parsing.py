"""One file's content -> a sink: the parse step shared by ingest, summarize and reingest.

``parse_into`` opens the file (gunzipping when needed), runs the parser for its kind and returns
what was found (``Parsed``); ``refusal`` then says whether the file is a log at all. Parsers never
raise on bad input: a bad line is ``sink.error``. A row for a table the store does not have is a
bug in a parser, and raises ``UnknownTableError`` here rather than being set aside.
"""
from __future__ import annotations

import importlib
import io
from dataclasses import dataclass, field
from typing import Callable

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.records import EVENT_TABLES
from compilewatch.ingest.units import Unit

NOT_A_LOG = "not a log: no torch.compile log record, trace record, benchmark row or timing in it"


class UnknownTableError(Exception):
    """A parser emitted a row for a table no migration creates (a bug in that parser)."""


# The one table from a file's kind to its reader, ``parse(stream, sink)``: module and function,
# imported on first use (a summarize of text logs never loads the trace reader). A kind that is
# not here has nothing to parse; a manifest's reader takes its host probe alone.
READERS: dict[str, tuple[str, str]] = {
    detect.TORCH_TRACE: ("compilewatch.ingest.trace", "parse_trace"),
    detect.TORCH_LOGS: ("compilewatch.ingest.text", "parse_text"),
    detect.BENCH_CSV: ("compilewatch.ingest.bench_csv", "parse_bench_csv"),
    detect.TIMINGS: ("compilewatch.ingest.timings", "parse_timings"),
    detect.MANIFEST: ("compilewatch.ingest.manifest", "parse_manifest"),
}


def reader_for(kind: str):
    """kind -> its reader ``parse(stream, sink)``, or None for a kind with nothing to parse."""
    entry = READERS.get(kind)
    if entry is None:
        return None
    module, name = entry
    return getattr(importlib.import_module(module), name)


@dataclass
class Parsed:
    """What one file gave, counted once, here: the pipeline's result, ingest's report and
    summarize all read these counts."""
    records: dict[str, int] = field(default_factory=dict)   # rows per table, in the order first seen
    errors: int = 0
    log_records: int = 0      # log records the reader recognised, whether or not they became rows

    @property
    def rows(self) -> int:
        return sum(self.records.values())

    @property
    def recognised(self) -> bool:
        return bool(self.records or self.errors or self.log_records)


class Stop:
    """Set from another thread to end the input early (the file turned out to be stored already):
    the stream then reads as if at its end, and the parser finishes normally."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> None:
        self.requested = True


class _Watched(io.RawIOBase):
    """The file's bytes as read from disk, reporting how far in we are and reading as ended once
    `stop` is requested. Checked once per block read (1 MiB), below the buffered reader, so the
    readers iterate lines in C: a Python step per line cost more than the envelope decoding."""

    def __init__(self, f, on_bytes: Callable[[int], None] | None, stop: Stop | None):
        self.f, self.on_bytes, self.stop = f, on_bytes, stop

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self.stop is not None and self.stop.requested:
            return 0
        n = self.f.readinto(buf)
        if self.on_bytes is not None:
            self.on_bytes(self.f.tell())
        return n

    def close(self) -> None:
        self.f.close()
        super().close()


def open_watched(path, gzipped: bool, on_bytes: Callable[[int], None] | None = None, stop: Stop | None = None):
    """The file's content as a buffered binary stream (gunzipped when it is gzip), with progress
    reported in bytes of the file on disk and an early end once `stop` is requested."""
    watched = _Watched(open(path, "rb", buffering=0), on_bytes, stop)
    if gzipped:
        return io.BufferedReader(detect.gunzip(io.BufferedReader(watched, _BLOCK)), _BLOCK)
    return io.BufferedReader(watched, _BLOCK)


_BLOCK = 1 << 20


class FileSlice:
    """`n` bytes of a file from where it stands, as a stream the readers take (a range of a file
    parsed by a process of its own: ingest/text_ranges.py, ingest/trace_ranges.py); `on_read` is
    told the bytes read so far after each read."""

    def __init__(self, f, n: int, on_read: Callable[[int], None] | None = None):
        self.f, self.left, self.on_read, self.read_so_far = f, n, on_read, 0

    def read(self, size: int) -> bytes:
        if self.left <= 0:
            return b""
        data = self.f.read(min(size, self.left))
        self.left -= len(data)
        if self.on_read is not None:   # the bytes of the slice read so far, for a progress bar
            self.read_so_far += len(data)
            self.on_read(self.read_so_far)
        return data


class Tally:
    """Counts what one file gave (the only place rows and errors are counted), checks table names,
    and passes everything on to the sink."""

    def __init__(self, sink):
        self.sink = sink
        self.parsed = Parsed()
        self.unknown: set[str] = set()

    def row(self, table: str, row: dict) -> None:
        if table not in EVENT_TABLES:
            self.unknown.add(table)   # raised after the parser returns: parsers catch Exception
            return
        records = self.parsed.records
        records[table] = records.get(table, 0) + 1
        self.sink.row(table, row)

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.parsed.errors += 1
        self.sink.error(line_no, kind, message, excerpt)

    def meta(self, key: str, value) -> None:
        if key == "log_records":       # the text reader's count
            self.parsed.log_records += value
            return
        if key == "trace_stats":       # the trace reader's
            self.parsed.log_records += value.get("envelopes", 0)
        self.sink.meta(key, value)

    def checked(self, kind: str) -> Parsed:
        """What the file gave, once no row went to a table the store lacks."""
        if self.unknown:
            raise UnknownTableError(f"{kind} parser emitted rows for unknown table(s) {sorted(self.unknown)}; "
                                    f"add them to records.EVENT_TABLES and a migration")
        return self.parsed


def parse_into(sink, unit: Unit, kind: str, sniffed: detect.Sniffed | None,
               on_bytes: Callable[[int], None] | None = None, stop: Stop | None = None, ranges: int = 1,
               raw_refs: bool = False) -> Parsed:
    """Parse `unit` as `kind` into `sink`. A file whose events are not counted (see
    units.counts_events) is not parsed; an unknown kind is one error. `ranges` > 1: a large plain
    TORCH_LOGS text file is parsed in up to that many processes
    (ingest/text_ranges.py), a large plain TORCH_TRACE file read by that many
    (ingest/trace_ranges.py), with the same rows. `raw_refs`: the store keeps `unit.path` byte for
    byte as the file's raw copy, so a plain TORCH_TRACE's artifact rows may point into it
    (trace/parsers/artifacts.py) instead of holding their payloads."""
    raw_refs = raw_refs and kind == detect.TORCH_TRACE and not (sniffed and sniffed.gzipped)
    split = ranges > 1 and unit.events and not (sniffed and sniffed.gzipped)
    if split and kind == detect.TORCH_LOGS:
        from compilewatch.ingest.staging import StagingSink
        from compilewatch.ingest.text_ranges import parse_in_ranges
        # the ranges are put back together in a sink that takes them (ingest's staged batches,
        # summarize's counts: see parse_in_ranges); any other sink is handed what staged ranges hold
        staging = sink if hasattr(sink, "part") else StagingSink(None)
        try:
            parsed = parse_in_ranges(staging, unit.path, ranges, on_bytes)
            if parsed is not None and staging is not sink:
                staging.replay(sink)
        finally:
            if staging is not sink:
                staging.cleanup()
        if parsed is not None:
            if on_bytes is not None:
                on_bytes(unit.path.stat().st_size)
            return parsed
    tally = Tally(sink)
    if split and kind == detect.TORCH_TRACE:
        from compilewatch.ingest.trace_ranges import parse_in_ranges as trace_in_ranges
        try:
            if trace_in_ranges(tally, unit.path, ranges, getattr(sink, "dir", None), on_bytes, stop,
                               raw_refs) is not None:
                return tally.checked(kind)
        except Exception as e:
            _read_failed(tally, e)
            return tally.checked(kind)
    if not unit.events:
        if kind == detect.TORCH_LOGS:
            _text_only(tally, unit, sniffed)
        return tally.checked(kind)
    if kind == detect.UNKNOWN:
        tally.error(0, "unknown_format", sniffed.reason if sniffed and sniffed.reason else NOT_A_LOG, "")
        return tally.parsed
    parse = reader_for(kind)
    if parse is None:
        return tally.parsed
    with open_watched(unit.path, bool(sniffed and sniffed.gzipped), on_bytes, stop) as stream:
        try:
            parse(stream, tally, raw_refs=True) if raw_refs else parse(stream, tally)
            why = detect.damage(stream)
            if why:  # a gzip cut short or damaged: what decoded before it is kept
                tally.error(0, "truncated", why, "")
        except Exception as e:
            _read_failed(tally, e)
    return tally.checked(kind)


def _read_failed(tally: Tally, e: Exception) -> None:
    """A read that stopped early is one error of the file; the rows read before it are kept (a
    parser bug must not lose the rest of the file either)."""
    if isinstance(e, (EOFError, OSError)):
        tally.error(0, "truncated", f"the file could not be read to its end: {e}", "")
    else:
        tally.error(0, "internal", f"parser failed: {type(e).__name__}: {e}", "")


class _RowsOnly:
    """A sink for the text-only pass: rows go through (to the tally, counted as this file's); the
    text's unparsable lines were never this file's to count (its trace is the source), so they are
    not errors of it."""

    def __init__(self, sink):
        self.sink = sink

    def row(self, table, row):
        self.sink.row(table, row)

    def error(self, *args):
        pass

    def meta(self, key, value):
        pass


def _text_only(tally: Tally, unit: Unit, sniffed: detect.Sniffed | None) -> None:
    """A bundle's TORCH_LOGS text beside its TORCH_TRACE: only the facts the trace lacks (CUDA-graph
    skips), so no graph break or recompile is counted twice."""
    from compilewatch.ingest.text import parse_text
    with open_watched(unit.path, bool(sniffed and sniffed.gzipped)) as stream:
        try:
            parse_text(stream, _RowsOnly(tally), text_only=True)
        except (EOFError, OSError):
            pass   # the same damage is the trace's file's to report when it has it; the text is extra


def refusal(unit: Unit, kind: str, sniffed: detect.Sniffed | None, parsed: Parsed) -> str | None:
    """Why this file is not a log, or None when it is one. A file in a bundle is what its manifest
    says; any other file is a log when something in it was recognised."""
    if unit.role is not None:
        return None
    if kind == detect.MANIFEST:   # its host probe belongs to the bundle's run, which the bundle names
        return f"{NOT_A_LOG} (a bundle's manifest.json: ingest the bundle's folder or archive)"
    if kind == detect.UNKNOWN:
        return f"not a log: {sniffed.reason}" if sniffed and sniffed.reason else NOT_A_LOG
    if not parsed.recognised:
        if sniffed and sniffed.reason == "empty file":
            return "not a log: the file is empty"
        return NOT_A_LOG
    return None
