"""What kind of file is this? Decided from its first bytes, never from its name alone: uploads
arrive as 'log.txt' whatever they hold."""
from __future__ import annotations

import io
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from compilewatch.ingest.formats import glog

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 256 * 1024

TORCH_TRACE = "torch_trace"
TORCH_LOGS = "torch_logs"
BENCH_CSV = "bench_csv"
TIMINGS = "timings"
MANIFEST = "manifest"
UNKNOWN = "unknown"

_GLOG = glog.PREFIX_BYTES
_OLD_PREFIX = re.compile(rb"^(?:\[rank\d+\]:)?\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)\]")
_DYNAMO_MARKERS = (
    b"torch._dynamo", b"torch/_dynamo", b"Graph break", b"Recompiling function", b"__recompiles",
    b"__graph_breaks", b"torch._inductor", b"torch/_inductor", b"cache_size_limit", b"recompile_limit",
    b"Graph Break Reason", b"TORCH_LOGS", b"torch/_functorch", b"torch._functorch",
)


@dataclass
class Sniffed:
    kind: str
    gzipped: bool
    started_at: datetime | None = None  # earliest timestamp found in the head, UTC assumed
    reason: str = ""


class _ForgivingGunzip(io.RawIOBase):
    """gunzip that hands out every byte it can decode and then ends, instead of raising: a gzip
    log cut short by a crash or a partial upload still yields all the lines before the cut, and
    bytes that are damaged end the stream where the damage starts. What went wrong is left in
    ``damage`` for the caller to record. Concatenated gzip members (gzip -c a b) are read in turn."""

    def __init__(self, raw):
        self._raw = raw
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""
        self._done = False
        self.damage: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self._pending and not self._done:
            self._fill()
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _fill(self) -> None:
        data = self._d.unconsumed_tail or self._raw.read(_GZ_CHUNK)
        if not data:
            try:
                tail = self._d.flush()  # output zlib still holds, and what a cut stream decodes to
            except zlib.error:
                tail = b""
            if tail:
                self._pending = tail
                return
            if not self._d.eof:
                self.damage = "compressed stream ends early (the file was cut short)"
            self._done = True
            return
        before = self._d.copy()
        try:
            self._pending = self._d.decompress(data, _GZ_OUT)
        except zlib.error as e:
            self._pending = self._salvage(before, data)
            self.damage = f"compressed stream is damaged: {e}"
            self._done = True
            return
        if self._d.eof:  # one member done: another may follow (gzip -c a b > ab.gz)
            rest = self._d.unused_data or self._raw.read(2)
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            if not rest.strip(b"\x00"):
                self._done = True  # end of file, or the zero padding some tools append
            elif rest[:2] != GZIP_MAGIC:
                self.damage = "bytes after the end of the compressed stream were ignored"
                self._done = True
            else:
                try:
                    self._pending += self._d.decompress(rest, _GZ_OUT)
                except zlib.error as e:
                    self.damage = f"compressed stream is damaged: {e}"
                    self._done = True

    @staticmethod
    def _salvage(d, data: bytes) -> bytes:
        # The chunk that failed also holds good bytes before the damage: feed it again in small
        # pieces and keep everything decoded up to the piece that fails.
        out = []
        for i in range(0, len(data), 512):
            try:
                out.append(d.decompress(data[i:i + 512], _GZ_OUT))
            except zlib.error:
                break
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


_GZ_CHUNK = 256 * 1024
_GZ_OUT = 4 * 1024 * 1024  # at most this much decoded per step: a bomb never sits in memory whole


def open_binary(path: Path):
    """A binary stream of the file's content, gunzipped when it is gzip. A damaged or cut-off gzip
    ends early instead of raising; ``damage(stream)`` then says why."""
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == GZIP_MAGIC:
        return io.BufferedReader(_ForgivingGunzip(f), buffer_size=1 << 20)
    return f


def gunzip(f):
    """The gunzipped content of the binary file object `f`, read forgivingly as open_binary does."""
    return _ForgivingGunzip(f)


def damage(stream) -> str | None:
    """Why a stream from open_binary ended early, or None."""
    raw = getattr(stream, "raw", None)
    return getattr(raw, "damage", None)


def sniff(path: Path, now: datetime | None = None) -> Sniffed:
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(2)
        f.seek(0)
        if magic != GZIP_MAGIC:
            return _classify(f.read(SNIFF_BYTES), False, path.name, now)
        g = _ForgivingGunzip(f)
        head = io.BufferedReader(g).read(SNIFF_BYTES)
    if not head and g.damage:
        return Sniffed(UNKNOWN, True, reason=g.damage)
    return _classify(head, True, path.name, now)


def _classify(head: bytes, gzipped: bool, name: str, now: datetime | None) -> Sniffed:
    if not head.strip():
        return Sniffed(TORCH_LOGS, gzipped, reason="empty file")
    lines = head.splitlines()[:400]
    started = _first_timestamp(lines, now)
    if any(_is_trace_line(l) for l in lines[:50]):
        return Sniffed(TORCH_TRACE, gzipped, started)
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        if b'"callables"' in head[:4096]:
            return Sniffed(TIMINGS, gzipped)
        if b'"run_id"' in head[:8192]:
            return Sniffed(MANIFEST, gzipped)
    first = lines[0].lower() if lines else b""
    if b"," in first and b"speedup" in first and (b"name" in first or b"model" in first):
        return Sniffed(BENCH_CSV, gzipped)
    nul_share = head.count(b"\x00") / max(len(head), 1)
    printable = sum(1 for b in head[:4096] if b >= 32 or b in (9, 10, 13)) / max(len(head[:4096]), 1)
    if nul_share > 0 or printable < 0.95:
        if not any(m in head for m in _DYNAMO_MARKERS):
            return Sniffed(UNKNOWN, gzipped, reason="binary content: not a TORCH_TRACE, TORCH_LOGS text or benchmark CSV")
    return Sniffed(TORCH_LOGS, gzipped, started)


def _is_trace_line(line: bytes) -> bool:
    """A glog-prefixed line whose message is a JSON envelope: TORCH_TRACE."""
    m = _GLOG.match(line)
    return m is not None and line[m.end():m.end() + 2] == b'{"'


def _first_timestamp(lines, now: datetime | None) -> datetime | None:
    now = now or datetime.now(timezone.utc)
    for line in lines:
        m = _OLD_PREFIX.match(line)
        if m:
            y, mo, d, h, mi, s, ms = (int(x) for x in m.groups())
            try:
                return datetime(y, mo, d, h, mi, s, ms * 1000 % 1_000_000, tzinfo=timezone.utc)
            except ValueError:
                continue
        m = _GLOG.match(line)
        if m:
            t = glog.epoch(m.group("md").decode(), m.group("hms").decode(), "0", now.timestamp())
            if t is not None:
                return datetime.fromtimestamp(t, timezone.utc)
    return None
