"""One large TORCH_LOGS text file parsed on every core: cut into byte ranges at lines that start a
log record, each range parsed by a process of its own into a sink of its own, the ranges'
rows put back together in the file's order with the errors, line numbers and recompile numbers of
one parse from the first line.

Parsing is Python and the text parser is the bound of a text ingest (~1.6 CPU-s per 100 MB), so a
big file only goes faster on more than one core. What the parser carries from one record to the
next (ingest/text/reader.py, ingest/text/__init__.py) is put back here:

- the record still open per (rank, pid), and per run of unprefixed lines: a process's record only
  ends when that process's next record starts, or at the end of the file. Each range leaves the
  records it has open unfinished and says where it first saw each (rank, pid); those records are
  finished here, where one parse from the start finishes them: at the cut, when the range's first
  line starts that process's next record, else at the end of the file, in the order of their
  first lines;
- the recompile numbering (recompile_no, per file): a range numbers its recompiles from 1, and its
  rows are moved on by the recompiles numbered before it when they are loaded;
- the line numbers: each range numbers its own lines from 1, and everything it gave (rows, errors,
  the records it left open, the first lines it saw) is moved on by the lines of the ranges before
  it once all are parsed; counting them before a range started (the newlines before it) held the
  last range back by that count (0.26 s for the first half of a 1 GB log).

A cut that cannot be put back this way (a range's first line of a process continues that
process's record from before the cut; a record left open would end in the middle of a later
range; the cut line reads as a continuation of the line before it) drops the ranges, and the file
is parsed in one piece: the stored rows are always exactly those of one parse.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.child_process import read_counts, report_read, start_worker
from compilewatch.ingest.parsing import FileSlice, Parsed, Tally
from compilewatch.ingest.records import moved_line
from compilewatch.ingest.text import TextContext, assembler, read_lines
from compilewatch.ingest.text.reader import BARE_KEY, MAX_RECORD_LINES, RECORD_STARTS, Record, RecordAssembler, starts_record

# A file smaller than two of these is parsed in one piece: a process costs more than it saves.
MIN_RANGE_BYTES = 16 << 20
SCAN_BYTES = 8 << 20   # how far past its place a cut is looked for (a line that starts a record)
POLL_SECONDS = 0.2     # how often the other ranges' progress is read once this process's range is parsed


class _MaybeContinued:
    """The parser of a range's first record of a (rank, pid) whose first line does not start a
    record: it may continue the record of that process left open before the cut, so its lines
    are kept until the merge knows; it is never parsed in the range."""

    name = "maybe continued"

    @staticmethod
    def parse(rec, ctx) -> None:
        raise AssertionError("a record that may continue one from before the cut is not parsed in its range")


@dataclass
class Seen:
    """A range's first line of one (rank, pid): where, with what prefix, whether it starts a
    record, the mark before it; when it does not start one, the record it opened (kept aside,
    see _MaybeContinued), the errors that line gave, the mark where that record ended (None: still
    open at the range's end)."""
    line_no: int
    prefix: str | None
    starts: bool
    mark: tuple
    maybe: Record | None = None
    errors: list = field(default_factory=list)
    ended: tuple | None = None


class RangeAssembler(RecordAssembler):
    """The record assembler of one range: marks what was staged before it first saw each (rank,
    pid) (a record left open by the ranges before is finished right there), keeps aside the lines
    of a first record that may continue one from before the cut, and leaves the records open at
    its end to the caller (``left_open``) instead of finishing them."""

    def __init__(self, wanted, on_record, on_error, mark):
        super().__init__(wanted, on_record, on_error)
        self._mark = mark
        self.first_seen: dict = {}   # key -> Seen

    def _prefixed(self, line_no, s, prefix, rank, pid, cid, art, level, tsraw, msg):
        key = (rank, pid)
        if key in self.first_seen:
            super()._prefixed(line_no, s, prefix, rank, pid, cid, art, level, tsraw, msg)
            return
        seen = self.first_seen[key] = Seen(line_no, prefix, msg.startswith(RECORD_STARTS), self._mark())
        if seen.starts:
            super()._prefixed(line_no, s, prefix, rank, pid, cid, art, level, tsraw, msg)
            return
        # as one parse would read it with no record of this process open, its errors held back
        on_error = self._on_error
        self._on_error = lambda *err: seen.errors.append(err)
        try:
            super()._prefixed(line_no, s, prefix, rank, pid, cid, art, level, tsraw, msg)
        finally:
            self._on_error = on_error
        rec = seen.maybe = self._open[key]
        rec.parser = _MaybeContinued
        self.records -= 1   # counted by the merge when it is a record of its own
        self._add(rec, line_no, msg)

    def _unprefixed(self, line_no, s):
        if BARE_KEY in self.first_seen:
            super()._unprefixed(line_no, s)
            return
        before = self._open.get(BARE_KEY)
        super()._unprefixed(line_no, s)
        if self._open.get(BARE_KEY) is not before:
            # marked after the line: with no bare record open before it, the line staged nothing
            self.first_seen[BARE_KEY] = Seen(line_no, None, True, self._mark())

    def _finish(self, rec: Record) -> None:
        if rec.parser is _MaybeContinued:
            self.first_seen[(rec.rank, rec.pid)].ended = self._mark()
            rec.parser = None   # nothing to parse here: the merge decides
        super()._finish(rec)

    def left_open(self) -> dict:
        """key -> (prefix, the record when a parser wants it, else None) of each record still open."""
        return {k: (r.prefix, r if r.parser is not None else None) for k, r in self._open.items()}


@dataclass
class Range:
    """One range of the file and, once parsed, what it gave."""
    start: int
    end: int
    first_line: int = 1           # its first line's number in the file (set by _number)
    lines: int = 0                # its lines (parse_range), whose numbers it counts from 1
    first_text: str = ""          # its first line, decoded (the cut line)
    sink: object = None            # the range's own sink (see parse_in_ranges), once parsed
    parsed: Parsed | None = None
    recompiles: int = 0
    first_seen: dict = field(default_factory=dict)
    left_open: dict = field(default_factory=dict)
    last_prefix: str | None = None


def parse_range(path: Path, rng: Range, part, on_read=None) -> Range:
    """Parse one range into `part`, a sink of its own (in a worker process, or this one);
    `on_read(n)` is told the range's bytes read so far."""
    sink = rng.sink = part
    tally = Tally(sink)
    ctx = TextContext(tally)

    marks = itertools.count()

    def mark():   # where the rows of a record left open before this range would go
        return (next(marks), *sink.mark(), ctx.recompile_no)
    asm = assembler(ctx, cls=lambda *args: RangeAssembler(*args, mark))
    with open(path, "rb", buffering=0) as f:
        f.seek(rng.start)
        rng.lines = read_lines(FileSlice(f, rng.end - rng.start, on_read), asm, 1) - 1
    tally.meta("log_records", asm.records)
    rng.parsed = tally.checked(detect.TORCH_LOGS)
    rng.recompiles = ctx.recompile_no
    rng.first_seen, rng.left_open, rng.last_prefix = asm.first_seen, asm.left_open(), asm._last_prefix
    rng.sink.finish()
    return rng


def range_count(size: int, workers: int, min_bytes: int | None = None) -> int:
    """How many ranges a file of `size` bytes is parsed in: one per `min_bytes` (MIN_RANGE_BYTES),
    at most one per worker (under 2: in one piece)."""
    return min(workers, size // (min_bytes or MIN_RANGE_BYTES))


def places(size: int, parts: int) -> list[int]:
    """Where the cuts between `parts` ranges of about equal size are looked for."""
    return [size * i // parts for i in range(1, parts)]


def cut(path: Path, parts: int, size: int, scan: int = SCAN_BYTES) -> list[Range]:
    """The file's ranges: each after the first starts at the first line at or past its place
    (``places``) that starts a record (reader.starts_record), within `scan` bytes."""
    starts = [(0, "")]
    with open(path, "rb") as f:
        for place in places(size, parts):
            place = max(place, starts[-1][0] + 1)
            f.seek(place)
            window = f.read(scan)
            at = window.find(b"\n") + 1   # the first whole line after the place
            found = None
            while at:
                nl = window.find(b"\n", at)
                if nl < 0:
                    break
                try:
                    s = window[at:nl].decode("utf-8")
                except UnicodeDecodeError:
                    s = ""
                if s.endswith("\r"):
                    s = s[:-1]
                if "\x00" not in s and starts_record(s):
                    found = (place + at, s)
                    break
                at = nl + 1
            if found is not None:
                starts.append(found)
    ends = [s[0] for s in starts[1:]] + [size]
    return [Range(s, e, first_text=text) for (s, text), e in zip(starts, ends)]


def _number(ranges: list[Range]) -> None:
    """Move each range's line numbers, counted from 1 in its own process, on by the lines of the
    ranges before it: its first line, the first lines it saw and their errors, the records it kept
    aside or left open. Its staged rows and its sink's errors are moved when they are taken over
    (``line_offset`` of ``append``)."""
    before = 0
    for rng in ranges:
        rng.first_line = before + 1
        if before:
            moved: set[int] = set()   # a record kept aside may be left open too: moved once
            records = [seen.maybe for seen in rng.first_seen.values()]
            records += [rec for _, rec in rng.left_open.values()]
            for rec in records:
                if rec is not None and id(rec) not in moved:
                    moved.add(id(rec))
                    rec.start_line += before
                    rec.line_nos = [n + before for n in rec.line_nos]
            for seen in rng.first_seen.values():
                seen.line_no += before
                seen.errors = [(moved_line(n, before), *rest) for n, *rest in seen.errors]
        before += rng.lines


def _plan(ranges: list[Range]):
    """What one parse from the start does, in its order, as steps over the ranges' results:
    ("rows", range, from mark, to mark) takes a stretch of a range's staged rows and errors,
    ("finish", [records]) finishes records the ranges left open, ("line", errors) is a range's first
    line of a process that turned out to start a record of its own. None when a cut cannot be put
    back (see the module docstring)."""
    steps: list = []
    still_open: dict = {}   # key -> (prefix, record or None), over the ranges so far
    for i, rng in enumerate(ranges):
        if i:
            lp = ranges[i - 1].last_prefix
            head = [seen for seen in rng.first_seen.values() if seen.line_no == rng.first_line]
            if not head or not head[0].starts:
                return None
            if lp is not None and rng.first_text.startswith(lp) and head[0].prefix != lp:
                return None   # one parse would read the cut line as a continuation of the line before
        events = []   # (mark, step) inside this range
        for key, seen in rng.first_seen.items():
            prefix_before, rec_before = still_open.pop(key, (None, None))
            if seen.maybe is not None and prefix_before is not None and seen.prefix == prefix_before:
                # one parse reads these lines as more of the record left open before the cut
                if rec_before is not None:
                    for line, no in zip(seen.maybe.lines, seen.maybe.line_nos):
                        if rec_before.cut:
                            break
                        rec_before.lines.append(line)
                        rec_before.line_nos.append(no)
                        rec_before.cut = len(rec_before.lines) >= MAX_RECORD_LINES
                    if seen.ended is not None:
                        events.append((seen.ended, ("finish", [rec_before])))
                if seen.ended is None:
                    rng.left_open[key] = (seen.prefix, rec_before)
                continue
            if rec_before is not None:   # finished by this line, before anything of it
                events.append((seen.mark, ("finish", [rec_before])))
            if seen.maybe is not None:   # a record of its own, that no parser wants
                events.append((seen.mark, ("line", seen.errors)))
                if seen.ended is None:
                    rng.left_open[key] = (seen.prefix, None)
        events.sort(key=lambda e: e[0][0])   # in the order of the marks (stable: finish, then line)
        at = None
        for mark, step in events:
            steps.append(("rows", rng, at, mark))
            steps.append(step)
            at = mark
        steps.append(("rows", rng, at, None))
        still_open.update(rng.left_open)
    last = sorted((rec for _, rec in still_open.values() if rec is not None), key=lambda r: r.start_line)
    if last:
        steps.append(("finish", last))
    return steps


def _merge(into: Parsed, part: Parsed) -> None:
    for table, n in part.records.items():
        into.records[table] = into.records.get(table, 0) + n
    into.errors += part.errors
    into.log_records += part.log_records


def parse_in_ranges(sink, path: Path, workers: int, on_bytes=None) -> Parsed | None:
    """Parse the TORCH_LOGS text file at `path` into `sink` in up to `workers` ranges, each in a
    process of its own (the first in this one), and return what it gave; None, with nothing added
    to `sink`, when the file is too small to split or a cut cannot be put back: then parse it in
    one piece.

    `sink` hands each range a sink of its own (``part()``: plain data, it crosses to the worker
    and back) that can say where it stands (``mark()``), and takes a stretch of a range's sink
    between two marks (``append``): ingest's StagingSink (staged batches and errors), summarize's
    SummarySink (counts, and the errors it samples in the file's order).

    `on_bytes(n)` is told the bytes parsed so far, by every range together, while they are parsed:
    each worker writes its range's count into memory shared with this process, which sums them at
    each read of its own range and, once that is done, every POLL_SECONDS until the last is."""
    size = os.path.getsize(path)
    count = range_count(size, workers)
    if count < 2:
        return None
    ranges = cut(path, count, size)
    if len(ranges) < 2:
        return None
    parts: list = []
    try:
        for _ in ranges:
            parts.append(sink.part())
        # fork: a worker is ready at once (spawn re-imports for ~0.3 s, a quarter of the parse it
        # shares); it only parses its range and writes its own files, nothing this process holds
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        counts = read_counts(ctx, len(ranges)) if on_bytes is not None else None

        def own_read(n):
            counts[0] = n
            on_bytes(sum(counts))
        with ProcessPoolExecutor(len(ranges) - 1, mp_context=ctx, initializer=start_worker,
                                 initargs=(os.getpid(), counts)) as pool:
            futures = [pool.submit(parse_range, path, rng, part, partial(report_read, i) if counts is not None else None)
                       for i, rng, part in zip(itertools.count(1), ranges[1:], parts[1:])]
            first = parse_range(path, ranges[0], parts[0], own_read if counts is not None else None)
            waiting = set(futures)
            while waiting and counts is not None:
                waiting = wait(waiting, timeout=POLL_SECONDS).not_done
                on_bytes(sum(counts))
            ranges = [first] + [f.result() for f in futures]
    except Exception:   # a worker that could not start or died (out of memory): parse in one piece
        for part in parts:   # made here, so their staged rows are found whichever process wrote them
            part.cleanup()
        return None
    _number(ranges)
    steps = _plan(ranges)
    if steps is None:
        for rng in ranges:
            rng.sink.cleanup()
        return None
    parsed = Parsed()
    numbered = 0   # recompiles numbered before the current range, by the ranges and records before it
    current, spliced, own = None, 0, 0   # the range; the recompiles finished inside it so far; its own so far
    for step in steps:
        if step[0] == "rows":
            _, rng, start, stop = step
            if rng is not current:
                if current is not None:
                    numbered += current.recompiles + spliced
                current, spliced = rng, 0
                _merge(parsed, rng.parsed)
            sink.append(rng.sink, numbered + spliced, start and start[1:3], stop and stop[1:3],
                        line_offset=rng.first_line - 1)
            own = stop[3] if stop else rng.recompiles
            continue
        tally = Tally(sink)
        ctx = TextContext(tally)
        if step[0] == "line":
            tally.parsed.log_records += 1
            for err in step[1]:
                ctx.error(*err)
        else:   # records left open by the ranges, finished where one parse finishes them
            ctx.recompile_no = first = numbered + spliced + own
            asm = assembler(ctx)
            for rec in step[1]:
                asm.finish(rec)
            spliced += ctx.recompile_no - first
        sink.finish()
        _merge(parsed, tally.checked(detect.TORCH_LOGS))
    return parsed
