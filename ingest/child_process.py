"""What a parse worker process does first: die with the process that started it.

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
