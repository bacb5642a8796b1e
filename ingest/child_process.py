"""What a parse worker process does first: die with the process that started it; and how it tells
that process how far it has read.

A worker of a ProcessPoolExecutor waits on its call queue for the next task. When its parent is
killed (kill -9 of `compilewatch ingest`, a CI job's timeout), the queue's other end stays open in
the sibling workers, so no worker ever reads end-of-file: they would sleep on forever, and a worker
forked while the parent held the store's shared lock (its duplicate lookup runs beside the parse)
would hold that lock forever too, keeping every writer out of the store. On Linux the kernel kills
the worker when its parent dies (PR_SET_PDEATHSIG); elsewhere nothing changes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1

# Where this worker writes how far it has read: one slot per task of its parent's (a shared array the
# parent made before the pool and handed to each worker as it started; None: nobody asked)
_read_counts = None


def die_with_parent(parent_pid: int) -> None:
    """ProcessPoolExecutor initializer: SIGKILL this process when `parent_pid` dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:   # the parent died before the request was made
        os._exit(1)


def start_worker(parent_pid: int, read_counts=None) -> None:
    """ProcessPoolExecutor initializer: die with the parent; ``read_counts`` (a shared array of
    ``read_counts(ctx, n)``) is where ``report_read`` writes."""
    global _read_counts
    _read_counts = read_counts
    die_with_parent(parent_pid)


def read_counts(ctx, slots: int):
    """Bytes read per task, in memory the workers of a pool made in ``ctx`` share with this process
    (handed to them through start_worker's arguments, as shared memory must be). A parse in
    another process reports its progress here: its parent sums the slots for the progress bar."""
    return ctx.Array("q", slots, lock=False)


def report_read(slot: int, n: int) -> None:
    """In a worker: task `slot` has read `n` bytes so far."""
    if _read_counts is not None:
        _read_counts[slot] = n
