"""What kind of file is this? Decided from its first bytes, never from its name alone: uploads
arrive as 'log.txt' whatever they hold."""
from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 256 * 1024

TORCH_TRACE = "torch_trace"
TORCH_LOGS = "torch_logs"
BENCH_CSV = "bench_csv"
TIMINGS = "timings"
MANIFEST = "manifest"
UNKNOWN = "unknown"

_GLOG_JSON = re.compile(rb"^(?:\[rank\d+\]:)?[VIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]]*\] \{\"")
_GLOG = re.compile(rb"^(?:\[rank\d+\]:)?[VIWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +\d+ ")
_OLD_PREFIX = re.compile(rb"^(?:\[rank\d+\]:)?\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)\]")
_DYNAMO_MARKERS = (
    b"torch._dynamo", b"torch/_dynamo", b"Graph break", b"Recompiling function", b"__recompiles",
    b"__graph_breaks", b"torch._inductor", b"torch/_inductor", b"cache_size_limit", b"recompile_limit",
    b"Graph Break Reason", b"TORCH_LOGS",
)


@dataclass
class Sniffed:
    kind: str
    gzipped: bool
    started_at: datetime | None = None  # earliest timestamp found in the head, UTC assumed
    reason: str = ""


def open_binary(path: Path):
    """A binary stream of the file's content, gunzipped when it is gzip."""
    f = open(path, "rb")
    magic = f.read(2)
    f.seek(0)
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=f, mode="rb")
    return f


def sniff(path: Path, now: datetime | None = None) -> Sniffed:
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(SNIFF_BYTES)
    gzipped = raw[:2] == GZIP_MAGIC
    head = raw
    if gzipped:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
                head = g.read(SNIFF_BYTES)
        except (OSError, EOFError):
            try:
                with gzip.open(path, "rb") as g:
                    head = g.read(SNIFF_BYTES)
            except (OSError, EOFError) as e:
                return Sniffed(UNKNOWN, True, reason=f"gzip stream is corrupt: {e}")
    return _classify(head, gzipped, path.name, now)


def _classify(head: bytes, gzipped: bool, name: str, now: datetime | None) -> Sniffed:
    if not head.strip():
        return Sniffed(TORCH_LOGS, gzipped, reason="empty file")
    lines = head.splitlines()[:400]
    started = _first_timestamp(lines, now)
    if any(_GLOG_JSON.match(l) for l in lines[:50]):
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
            mo, d, h, mi, s, frac = (int(x) for x in m.groups())
            # glog prints no year: take the latest year that does not put the run in the future.
            for year in (now.year, now.year - 1):
                try:
                    ts = datetime(year, mo, d, h, mi, s, tzinfo=timezone.utc)
                except ValueError:
                    continue
                if ts <= now:
                    return ts
    return None
