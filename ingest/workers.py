"""Parsing on every core: worker processes parse and stage files, this process writes them.

Parsing is Python, so threads would share one core. Each worker process runs ``parse_and_stage``
on one file at a time (its rows staged as NDJSON batches and its raw copy made, both under the
ingest's tmp folder in the store) and hands back the ``Staged`` file, a few paths and counts. The
calling process is the one writer: it commits each file with ``commit_staged``, in the order of the
units, so the result table, the duplicate rules (same content in the store, or earlier in the same
ingest) and what each run holds are exactly those of an ingest in one process. Workers never open
the store; only a bounded number of files is parsed ahead of the writer, so staged files on disk
stay bounded too.
"""
from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as NotYet
from pathlib import Path
from typing import Callable

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.child_process import die_with_parent
from compilewatch.ingest.loader import Staged, commit_staged, parse_and_stage
from compilewatch.ingest.results import FAILED, FileResult, unreadable
from compilewatch.ingest.units import Unit, resolve_kind

# How long the writer waits for the next parsed file while keeping the writer lock; past it, the
# lock is let go for the rest of the wait (a large file is still being parsed).
WAIT_HOLDING_S = 0.25
AHEAD_PER_WORKER = 2   # files parsed ahead of the writer per worker: enough to keep every core busy


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


def _stage(unit: Unit, tmp_dir: Path, run_id: str | None) -> Staged | FileResult:
    """In a worker: one file parsed and copied, or why it could not be read."""
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(unit.name, detect.UNKNOWN, FAILED, message=unreadable(e))
    return parse_and_stage(unit, kind, sniffed, tmp_dir, run_id=run_id)


def ingest_in_workers(store, units: list[Unit], sizes: list[int], tmp_dir: Path, workers: int, *,
                      run_id: str | None, options: dict,
                      progress: Callable[[int, int, str], None] | None = None) -> list[FileResult]:
    """Ingest `units` with `workers` parse processes and this process as the writer; one result
    per unit, in the units' order."""
    results: list[FileResult] = []
    total, done = sum(sizes), 0
    # spawn, not fork: the writer may hold threads (a progress bar) and open connections
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        todo = iter(zip(units, sizes))
        pending: deque = deque()

        def submit() -> None:
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_stage, nxt[0], tmp_dir, run_id)))

        for _ in range(workers * AHEAD_PER_WORKER):
            submit()
        try:
            while pending:
                (unit, size), fut = pending.popleft()
                submit()
                if progress:
                    progress(done, total, unit.name)
                try:
                    staged = fut.result(timeout=WAIT_HOLDING_S)
                except NotYet:
                    store.release_writes()   # readers should not wait for a parse (store.writes_held)
                    staged = fut.result()
                results.append(staged if isinstance(staged, FileResult)
                               else commit_staged(store, staged, **options))
                done += size
        finally:
            for _, fut in pending:
                fut.cancel()   # what was staged already is removed with the ingest's tmp folder
    return results
