"""Parsing on every core: worker processes parse and stage files, this process writes them.

Parsing is Python, so threads would share one core. Each worker process runs ``parse_and_stage``
on one file at a time (its rows staged as NDJSON batches and its raw copy made, both under the
ingest's tmp folder in the store) and hands back the ``Staged`` file, a few paths and counts. The
calling process is the one writer: it commits each file with ``commit_staged``, in the order of the
units, so the result table, the duplicate rules (same content in the store, or earlier in the same
ingest) and what each run holds are exactly those of an ingest in one process. Workers never open
the store; only a bounded number of files is parsed ahead of the writer, so staged files on disk
stay bounded too.

An archive (a collected bundle's .tar.gz, most often) is unpacked by the worker that parses its
files, not by the writer before the first parse starts: unpacking the 92 sample bundles is about
an eighth of their ingest's CPU, and the writer's process is what binds a folder ingest. The
archive's files and failures then take its place, as if it had been unpacked first.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
from collections import deque
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as NotYet
from functools import partial
from pathlib import Path
from typing import Callable

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.archives import unpacked_size
from compilewatch.ingest.child_process import read_counts, report_read, start_worker
from compilewatch.ingest.loader import Staged, commit_staged, parse_and_stage
from compilewatch.ingest.results import FAILED, FileResult, unreadable
from compilewatch.ingest.units import Packed, Unit, resolve_kind, unpack

# How long the writer waits for the next parsed file while keeping the writer lock; past it, the
# lock is let go for the rest of the wait (a large file is still being parsed).
WAIT_HOLDING_S = 0.25
POLL_SECONDS = 0.2     # how often the workers' progress on a file still parsing is read
AHEAD_PER_WORKER = 2   # files parsed ahead of the writer per worker: enough to keep every core busy
# An archive of more files than this (many bundles in one) is only unpacked by its worker: its
# files are then parsed one per worker like any others, not all in the one that unpacked it.
PARSED_WITH_ARCHIVE = 16


# A parse worker is a spawned process: it imports for ~0.3 s before it parses a byte, and the writer
# waits that long for its first file. Below this many bytes to parse, this process alone is done
# about as soon or sooner. Measured on 2 cores, sample_logs/ folders ingested into fresh stores with
# 1 and 2 workers (median of 5): 3.7 MB unpacked 0.82 against 0.93 s, 7.4 MB 1.14 against 1.08 s,
# 8.4 MB 1.14 against 1.16 s, 24.9 MB 1.30 against 1.09 s.
POOL_MIN_BYTES = 8 << 20


def pool_pays_off(units: list[Unit | Packed]) -> bool:
    """Whether parse workers would ingest `units` sooner than the writer's process parsing them
    itself: they hold at least POOL_MIN_BYTES to parse, an archive or a gzipped log counted unpacked
    (archives.unpacked_size)."""
    total = 0
    for unit in units:
        total += unpacked_size(unit.path)
        if total >= POOL_MIN_BYTES:
            return True
    return False


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


def _stage(unit: Unit | Packed, tmp_dir: Path, run_id: str | None, slot: int | None = None):
    """In a worker: one file parsed and copied, or why it could not be read; for an archive, its
    units and failures, and each of its files staged (None when it holds many: see
    PARSED_WITH_ARCHIVE). A file given a `slot` reports its bytes parsed so far there
    (child_process.report_read)."""
    if isinstance(unit, Packed):
        units, failures = unpack(unit, tmp_dir)
        staged = [_stage(u, tmp_dir, run_id) for u in units] if len(units) <= PARSED_WITH_ARCHIVE else None
        return units, failures, staged
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(unit.name, detect.UNKNOWN, FAILED, message=unreadable(e))
    return parse_and_stage(unit, kind, sniffed, tmp_dir, run_id=run_id,
                           on_bytes=None if slot is None else partial(report_read, slot))


def ingest_in_workers(store, units: list[Unit | Packed], sizes: list[int], tmp_dir: Path, workers: int, *,
                      run_id: str | None, options: dict,
                      progress: Callable[[int, int, str], None] | None = None) -> tuple[list[FileResult], dict]:
    """Ingest `units` with up to `workers` parse processes (no more than the units, unless an
    archive among them may hold more files) and this process as the writer: one result per file,
    in the units' order (an archive's files at its place), and what each archive left packed
    held (Packed -> its units and failures, for ``units.settle``)."""
    results: list[FileResult] = []
    unpacked: dict = {}
    total, done = sum(sizes), 0
    if not any(isinstance(u, Packed) for u in units):   # an archive may hold more files than there are units
        workers = min(workers, len(units))
    ahead = workers * AHEAD_PER_WORKER
    # what is left to write, in order: [unit, its size, its parse's future once submitted, the slot
    # its worker reports its bytes parsed in (an archive's files, found later, have none)]
    line: deque = deque([unit, size, None, i] for i, unit, size in zip(itertools.count(), units, sizes))

    def write(staged: Staged | FileResult) -> FileResult:
        return staged if isinstance(staged, FileResult) else commit_staged(store, staged, **options)

    # spawn, not fork: the writer may hold threads (a progress bar) and open connections
    ctx = multiprocessing.get_context("spawn")
    counts = read_counts(ctx, len(units)) if progress else None

    def parsed_so_far(current) -> int:
        """The bytes of the files written, and of those the workers are parsing, as far as they are."""
        return done + sum(min(counts[e[3]], e[1]) for e in itertools.chain([current], line)
                          if e[2] is not None and e[3] is not None)

    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=start_worker,
                             initargs=(os.getpid(), counts)) as pool:
        try:
            while line:
                for entry in itertools.islice(line, ahead + 1):   # the next file and those parsed ahead of it
                    if entry[2] is None:
                        slot = entry[3] if counts is not None and not isinstance(entry[0], Packed) else None
                        entry[2] = pool.submit(_stage, entry[0], tmp_dir, run_id, slot)
                current = line.popleft()
                unit, size, fut, _ = current
                if progress:
                    progress(parsed_so_far(current), total, unit.name)
                try:
                    staged = fut.result(timeout=WAIT_HOLDING_S)
                except NotYet:
                    store.release_writes()   # readers should not wait for a parse (store.writes_held)
                    while progress and not wait([fut], timeout=POLL_SECONDS).done:
                        progress(parsed_so_far(current), total, unit.name)   # a large file moves the bar too
                    staged = fut.result()
                done += size
                if not isinstance(unit, Packed):
                    results.append(write(staged))
                    continue
                found, failed, parsed = staged
                unpacked[unit] = (found, failed)
                if parsed is None:   # many files: next in line, each parsed by whichever worker is free
                    line.extendleft(reversed([[u, 0, None, None] for u in found]))
                else:
                    results.extend(write(s) for s in parsed)
        finally:
            for _, _, fut in line:
                if fut is not None:
                    fut.cancel()   # what was staged already is removed with the ingest's tmp folder
    return results, unpacked
