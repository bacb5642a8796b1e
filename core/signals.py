"""Long-running commands stop when told, however they were started.

A process started with `&` from a non-interactive shell inherits SIGINT as ignored, and Python then
never raises KeyboardInterrupt: Ctrl-C or `kill -INT` would leave it running. So `inbox --watch`
and `dashboard` install their own handlers for SIGINT and SIGTERM alike (`stop_on_signals`). The
first signal raises KeyboardInterrupt in the main thread, which stops the work where it is: a
transaction in progress is rolled back as the exception leaves it, and each command puts back
what it held. Python runs a handler only between bytecodes, so a thread blocked inside a C call
(a query waiting on PostgreSQL, say) would not see it: if the process has not ended `grace_s`
seconds after the signal, it ends there (what it held is then recovered as a dead process's
claim). A second signal ends it at once.
"""
from __future__ import annotations

import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class stop_on_signals:
    """``with stop_on_signals(grace_s) as stop:`` handles SIGINT and SIGTERM for the block (main
    thread only) and restores the handlers after it. ``stop.event`` is set and
    ``stop.signum`` names the signal once one came."""

    def __init__(self, grace_s: float = 10.0):
        self.grace_s = grace_s
        self.event = threading.Event()
        self.signum: int | None = None
        self._before: dict = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:     # told twice: no more waiting
            os._exit(128 + signum)
        self.signum = signum
        self.event.set()
        timer = threading.Timer(self.grace_s, os._exit, [128 + signum])
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    def __enter__(self) -> "stop_on_signals":
        self._before = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)
