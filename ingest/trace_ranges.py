"""One large TORCH_TRACE file read on every core: cut into byte ranges at envelope lines, each range
read by a worker process, every envelope then parsed here, in the file's order, by one TraceParser.

Almost all of a trace's bytes are payload lines (graphs, guards, generated code): what costs is per
byte, not per record — finding where each payload ends, stripping its tabs, checking its md5,
compressing it for the artifacts table. That is the EnvelopeReader's work plus the compression, and
it needs nothing from the rest of the file, so it is what the workers do. Everything the parsers
carry from one record to the next (interned file names, recompile numbering, a frame's start and
its metrics, open chromium spans; ingest/trace/context.py) stays in this one process, which sees
the envelopes in the order one reader would yield them, with the same line numbers and the reader's
errors between them where it would have reported them. The rows are therefore exactly those of one
parse.

A cut is put at a line that starts with a glog level letter: neither a payload line (tab) nor a
blank line (which may belong to the payload before it), so the reader's state at that line is the
same whether it read the file from its start or from the cut, except for line numbers (counted
per range and added here) and its counts (summed here).

Memory stays flat in the file's size: a worker streams its range's envelopes to a spool file in
small batches, the ranges are ~16 MB, and only a few are read ahead of the parser.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.ingest.child_process import die_with_parent
from compilewatch.ingest.formats import glog
from compilewatch.ingest.parsing import FileSlice
from compilewatch.ingest.trace import TraceParser
from compilewatch.ingest.trace.compressor import compress
from compilewatch.ingest.trace.envelope import Envelope, EnvelopeReader, TraceStats
from compilewatch.ingest.trace.parsers import dispatch_tables, parsers_for
from compilewatch.ingest.trace.parsers.artifacts import STORERS

# A file smaller than two of these is read in one piece: a process costs more than it saves.
MIN_RANGE_BYTES = 16 << 20
RANGE_BYTES = 16 << 20      # about the size of each range
SCAN_BYTES = 8 << 20        # how far past its place a cut is looked for
SPOOL_BATCH_BYTES = 1 << 20  # a worker writes its envelopes to its spool file in batches of about this
_LEVELS = frozenset(glog.LEVEL_LETTERS.encode())


@dataclass
class Range:
    """Bytes [start, end) of the file and, once read, what its worker found."""
    index: int
    start: int
    end: int
    spool: Path | None = None
    lines: int = 0
    stats: TraceStats = field(default_factory=TraceStats)
    raw_refs: bool = False   # artifact payloads stay in the file (TraceContext.raw_refs): none compressed


class _Spool:
    """The reader's sink in a worker: its errors go into the same ordered stream as the envelopes,
    so they are reported here exactly where one reader reports them."""

    def __init__(self, out):
        self.out = out
        self.items: list = []
        self.bytes = 0

    def error(self, line_no, kind, message, excerpt="") -> None:
        self.items.append((line_no, kind, message, excerpt))   # a tuple: an error; a list: an envelope

    def envelope(self, env) -> None:
        # plain values: a list pickles in a fraction of the time an object with slots does
        self.items.append([env.line_no, env.name, env.data, env.payload_bytes, env.payload_ok, env.payload_z,
                           env.payload_size, env.prepared, env.raw_start, env.raw_end])
        self.bytes += 200 + (len(env.payload_bytes) if env.payload_bytes is not None else
                             len(env.payload_z) if env.payload_z is not None else 0)
        if self.bytes >= SPOOL_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.items:
            pickle.dump(self.items, self.out, protocol=pickle.HIGHEST_PROTOCOL)
            self.items, self.bytes = [], 0


def _prepare(env, data: bytes, fns: list, preparers: dict, raw_refs: bool) -> None:
    """What the parsers of `env` do with its payload alone, done here: an artifact row's compression
    (artifacts.STORERS) unless the row points into the raw copy (`raw_refs`), one parser's prepare()
    when it is the only reader, or the storer's own when none reads it (a graph's fingerprint); the
    payload's bytes then travel only when a reader still needs them."""
    readers = [fn for fn in fns if fn not in STORERS]
    env.payload_size = len(data)
    if len(readers) < len(fns) and not raw_refs:
        # compressed here even when a reader needs the bytes too ("artifact" envelopes: 23 of the
        # 111 MB trace's payload MB, which this process compressed itself before)
        env.payload_z = compress(data)
    if readers:
        prepare = preparers.get(readers[0]) if len(readers) == 1 else None
        if prepare is None:
            return
        env.prepared = prepare(env)
        if env.prepared is None:
            return
    elif len(fns) == 1 and fns[0] in preparers:
        env.prepared = preparers[fns[0]](env)   # what the storer keeps beside the payload (its fingerprint)
    env.payload_bytes = None


def read_range(path: Path, rng: Range, spool_dir: Path) -> Range:
    """Read one range's envelopes (in a worker process, or in this one) into a spool file, what
    their parsers do with a payload alone done here (``_prepare``), each at its byte offset in the
    file."""
    events, artifacts, _, preparers = dispatch_tables()
    rng.spool = spool_dir / f"range-{rng.index}.pickle"
    with open(path, "rb", buffering=0) as f, open(rng.spool, "wb", buffering=1 << 20) as out:
        spool = _Spool(out)
        reader = EnvelopeReader(spool, rng.stats, byte_offset=rng.start)
        f.seek(rng.start)

        def keep(env) -> None:
            data = env.payload_bytes
            if data is not None:
                fns = parsers_for(events, artifacts, env)
                if fns:
                    _prepare(env, data, fns, preparers, rng.raw_refs)
            spool.envelope(env)

        for env in reader.envelopes(FileSlice(f, rng.end - rng.start)):
            keep(env)
        last = reader.close()   # a range ends before an envelope line: its last payload is whole
        if last is not None:
            keep(last)
        spool.flush()
    rng.lines = reader.line_no
    return rng


def cut(path: Path, size: int, range_bytes: int | None = None, scan: int | None = None) -> list[Range]:
    """The file's ranges, of about `range_bytes` (default RANGE_BYTES): each after the first starts
    at the first line at or past its place that starts with a glog level letter, looked for within
    `scan` bytes (default SCAN_BYTES)."""
    range_bytes, scan = range_bytes or RANGE_BYTES, scan or SCAN_BYTES
    starts = [0]
    place = 0
    with open(path, "rb") as f:
        while True:
            # the first two ranges are a quarter and a half of the others: the parser waits for the
            # first one, so it should come soon
            n = len(starts)
            place = max(place + (range_bytes >> (3 - n) if n < 3 else range_bytes), starts[-1] + 1)
            if place >= size - range_bytes // 2:
                break
            f.seek(place)
            window = f.read(scan)
            at = window.find(b"\n") + 1
            while at and at < len(window) and window[at] not in _LEVELS:
                at = window.find(b"\n", at) + 1
            if at and at < len(window):
                starts.append(place + at)
    ends = starts[1:] + [size]
    return [Range(i, s, e) for i, (s, e) in enumerate(zip(starts, ends))]


def _replay(parser: TraceParser, rng: Range, line_offset: int, on_bytes=None) -> None:
    """A range's envelopes and errors, in its order, to the parser, at their lines in the file;
    `on_bytes` told after each batch where in the file its last record ended."""
    sink_error, dispatch = parser.sink.error, parser.dispatch
    with open(rng.spool, "rb") as f:
        while True:
            try:
                items = pickle.load(f)
            except EOFError:
                break
            env = None
            for item in items:
                if type(item) is tuple:
                    line_no, kind, message, excerpt = item
                    sink_error(line_no + line_offset, kind, message, excerpt)
                    continue
                line_no, name, data, env_payload, ok, z, size, prepared, start, end = item
                env = Envelope(line_no + line_offset, name, data)
                env.payload_bytes, env.payload_ok, env.payload_z, env.payload_size = env_payload, ok, z, size
                env.prepared, env.raw_start, env.raw_end = prepared, start, end
                dispatch(env)
            if on_bytes is not None and env is not None and env.raw_end is not None:
                on_bytes(env.raw_end)   # a range is many batches: the bar moves within it
    rng.spool.unlink(missing_ok=True)
    parser.stats.add(rng.stats)


def parse_in_ranges(sink, path: Path, workers: int, spool_dir: Path | None = None, on_bytes=None,
                    stop=None, raw_refs: bool = False) -> TraceStats | None:
    """Parse the TORCH_TRACE file at `path` into `sink`, its ranges read by up to `workers`
    processes; None, with nothing given to `sink`, when the file is too small to split or no
    worker could start: then parse it in one piece. A worker lost midway is replaced by reading
    its range here. `stop` requested (the file is stored already) ends it after the current range."""
    size = os.path.getsize(path)
    if workers < 2 or size < 2 * MIN_RANGE_BYTES:
        return None
    ranges = cut(path, size)
    if len(ranges) < 2:
        return None
    for rng in ranges:
        rng.raw_refs = raw_refs
    spool_dir = Path(tempfile.mkdtemp(prefix="trace-ranges-", dir=spool_dir))
    parser = TraceParser(sink, raw_refs=raw_refs)
    try:
        try:
            # fork: a worker is ready at once; it only reads its ranges and writes its spool files
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=die_with_parent,
                                       initargs=(os.getpid(),))
        except (OSError, ValueError):
            return None
        with pool:
            ahead = workers + 1   # ranges read ahead of the parser: what bounds the spool on disk
            futures = {}
            line_offset = 0
            for i, rng in enumerate(ranges):
                for j in range(i, min(i + ahead, len(ranges))):
                    if j not in futures:
                        try:
                            futures[j] = pool.submit(read_range, path, ranges[j], spool_dir)
                        except RuntimeError:   # the pool broke (a worker died): read the rest here
                            futures[j] = None
                future = futures.pop(i)
                try:
                    done = future.result() if future is not None else None
                except Exception:   # the worker died (out of memory, killed)
                    done = None
                if done is None:    # no worker read it: read it here
                    done = read_range(path, rng, spool_dir)
                _replay(parser, done, line_offset, on_bytes)
                line_offset += done.lines
                if on_bytes is not None:
                    on_bytes(done.end)
                if stop is not None and stop.requested:
                    for f in futures.values():
                        if f is not None:
                            f.cancel()
                    break
        return parser.close()
    finally:
        parser.ctx.compressor.flush()
        shutil.rmtree(spool_dir, ignore_errors=True)
