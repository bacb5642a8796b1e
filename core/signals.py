"""Long-running commands stop when told, however they were started.

A process started with `&` from a non-interactive shell inherits SIGINT as ignored, and Python then
never raises KeyboardInterrupt: Ctrl-C or `kill -INT` would leave it running. So `inbox --watch`
and `dashboard` install their own handlers for SIGINT and SIGTERM alike (`stop_on_signals`). The
handler raises KeyboardInterrupt in the main thread, which stops the work where it is: a
transaction in progress is rolled back as the exception leaves it, and each command puts back
what it held.

Python runs that handler only between bytecodes of the main thread. A main thread blocked inside a
C call (a query waiting on a PostgreSQL advisory lock, say) runs it only when the call returns,
which may be never. So the grace does not hang on the handler: the interpreter's own C-level
handler writes each signal's number to a pipe (`signal.set_wakeup_fd`), and a watcher thread
blocked on that pipe (such calls release the GIL) wakes at once. If the process has not ended
`grace_s` seconds after the first signal, the watcher ends it (what it held is then recovered as
a dead process's claim); a second signal ends it at once.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_WAKE = 0   # written by __exit__ to end the watcher; no signal has number 0


class stop_on_signals:
    """``with stop_on_signals(grace_s) as stop:`` handles SIGINT and SIGTERM for the block (main
    thread only) and restores the handlers after it. ``stop.event`` is set and ``stop.signum``
    names the signal once one came. Once a signal came, its grace runs on past the block: a
    process that hangs on its way out still ends."""

    def __init__(self, grace_s: float = 10.0):
        self.grace_s = grace_s
        self.event = threading.Event()
        self.signum: int | None = None
        self._before: dict = {}
        self._wakeup_before = -1
        self._wake_w = -1
        self._seen = False      # a signal came (the watcher's count)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def _handle(self, signum, frame) -> None:
        # counting and the grace are the watcher's: it sees every signal, this handler only those
        # that arrive while the main thread runs Python
        self.signum = self.signum or signum
        self.event.set()
        raise KeyboardInterrupt

    def _watch(self, fd: int) -> None:
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            for signum in data:
                if signum == _WAKE:
                    return
                if signum not in SIGNALS:
                    continue
                if self._seen:          # told twice: no more waiting
                    os._exit(128 + signum)
                self._seen = True
                self.signum = self.signum or signum
                self.event.set()
                threading.Thread(target=self._grace, args=(signum,), name="stop-grace", daemon=True).start()


    def _grace(self, signum: int) -> None:
        threading.Event().wait(self.grace_s)
        print(f"compilewatch: still busy {self.grace_s:g} s after {signal.Signals(signum).name} "
              "(inside a call that does not return); ending now", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    def __enter__(self) -> "stop_on_signals":
        self._before = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._wake_w = w
        self._wakeup_before = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(r,), name="stop-watcher", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        signal.set_wakeup_fd(self._wakeup_before)
        for sig, handler in self._before.items():
            signal.signal(sig, handler)
        if not self._seen:  # nothing to count down: the watcher ends; after a signal it stays for a second one
            os.write(self._wake_w, bytes([_WAKE]))
