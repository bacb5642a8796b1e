"""Artifact payloads compressed beside the parser, their rows passed on in the order they came.

Compressing the per-compile artifacts (graphs, guards, output code) was the largest single cost of
a trace's parse once they were kept. Deflate releases the GIL while it runs, so one helper thread
does it on another core while the parser goes on; rows wait in a queue bounded in bytes, so memory
stays flat, and leave it in order, so the sink sees exactly the rows, in the order, of compressing
inline. Small payloads are compressed inline (a hand-off costs more than they do).
"""
from __future__ import annotations

import base64
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

try:
    # ISA-L's deflate writes a plain zlib stream (read back with the standard zlib) at ~5x the speed
    # of zlib's level 1, and smaller: 0.145 against 0.766 CPU-s and 19.6% against 20.2% of the size
    # on 60 MB of real traces in 40 KB pieces.
    from isal import isal_zlib as _deflate
except ImportError:   # a platform without an isal wheel
    import zlib as _deflate

INLINE_BYTES = 16 << 10      # below this a payload is compressed in the parser's thread
MAX_PENDING_BYTES = 8 << 20   # payload bytes waiting to be compressed before the parser waits


def compress(data: bytes) -> str:
    # Level 1: ingest speed is a bar, store size only has to stay reasonable (zlib's level 1 took
    # half the CPU of its level 6 for 23.5% instead of 21.1% of the size). Base64: the row travels
    # as NDJSON to DuckDB, which decodes it into the BLOB column.
    return base64.b64encode(_deflate.compress(data, 1)).decode("ascii")


class Compressor:
    def __init__(self, sink):
        self.sink = sink
        self._pending: deque = deque()   # [table, row, column, Future | str, payload bytes]
        self._pending_bytes = 0
        self._pool: ThreadPoolExecutor | None = None

    def row(self, table: str, row: dict, column: str, data: bytes) -> None:
        """Pass `row` on to the sink with `column` set to `data` compressed, after every row given
        before it."""
        if len(data) < INLINE_BYTES:
            if not self._pending:
                row[column] = compress(data)
                self.sink.row(table, row)
                return
            value = compress(data)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="cw-zlib")
            value = self._pool.submit(compress, data)
        self._pending.append((table, row, column, value, len(data)))
        self._pending_bytes += len(data)
        self._drain(wait=self._pending_bytes > MAX_PENDING_BYTES)

    def compressed(self, table: str, row: dict, column: str, value: str) -> None:
        """Pass `row` on with `column` set to `value`, a payload compressed already (by the process
        that read it, ingest/trace_ranges.py), after every row given before it."""
        row[column] = value
        if not self._pending:
            self.sink.row(table, row)
            return
        self._pending.append((table, row, column, value, 0))

    def _drain(self, wait: bool) -> None:
        pending = self._pending
        while pending:
            table, row, column, value, n = pending[0]
            if isinstance(value, Future):
                if not wait and not value.done():
                    return
                value = value.result()
            pending.popleft()
            self._pending_bytes -= n
            row[column] = value
            self.sink.row(table, row)
            wait = wait and self._pending_bytes > MAX_PENDING_BYTES

    def flush(self) -> None:
        """Every row given so far passed on; the helper thread ended."""
        while self._pending:
            self._drain(wait=True)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
