"""What the parser fuzzing feeds and where it checks: real seed inputs (fixtures and sample bundles),
byte-level mutations of them, and one target per parser boundary. A target returns normally for
any input, or raises one of the typed errors its boundary documents (an archive that cannot be
read is an ArchiveError, a bad manifest a BundleError); anything else escaping is a finding.

Used by tests/ingest/test_fuzz_parsers.py (hypothesis, a fixed budget in CI) and by
benchmarks/fuzz_parsers.py (random mutations for a given time, reporting how many inputs it tried).
"""
from __future__ import annotations

import gzip
import io
import json
import random
import shutil
import tarfile
import tempfile
from pathlib import Path

from compilewatch.core.errors import BundleError
from compilewatch.ingest import archives
from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.bench_csv import parse_bench_csv
from compilewatch.ingest.bundle import Manifest
from compilewatch.ingest.manifest import parse_manifest
from compilewatch.ingest.records import CountingSink
from compilewatch.ingest.text import parse_text
from compilewatch.ingest.timings import parse_timings
from compilewatch.ingest.trace import parse_trace

REPO = Path(__file__).resolve().parents[2]
TEXT_DIR = REPO / "tests" / "fixtures" / "text"
TRACE_DIR = REPO / "tests" / "fixtures" / "trace"
BUNDLES = sorted((REPO / "sample_logs").rglob("*.tar.gz"))
# bundles whose timings carry settings and whose manifests carry a host probe
EVIDENCE = sorted((REPO / "tests" / "fixtures" / "evidence").glob("*.tar.gz"))

# Byte strings that hit parsers' edges: line ends, NUL, numbers that overflow, JSON openers,
# glog prefixes, invalid UTF-8, gzip magic.
TOKENS = [b"\r", b"\r\n", b"\n", b"\x00", b"inf", b"-inf", b"nan", b"1e309", b"99999999999999999999999",
          b'{"', b"}", b"[", b'"', b",", b"\xff\xfe", b"\xc3", b"\x1f\x8b", b"\x1b[2J",
          b"V1122 01:54:11.465000 1 torch/_dynamo/x.py:1] ", b"[0/0] ", b'{"dynamo_start": {}}',
          b"Graph break", b"Recompiling function", b"\t", b" " * 300]


def _bundle_member(suffix: str, bundles=None) -> list[bytes]:
    out = []
    for b in BUNDLES[:6] if bundles is None else bundles:
        with tarfile.open(b) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith(suffix):
                    out.append(tf.extractfile(m).read())
    return out


def seeds() -> dict[str, list[bytes]]:
    """target name -> real inputs to mutate (kept small: mutations are cheap, parsing is not)."""
    text = [p.read_bytes()[:60_000] for p in sorted(TEXT_DIR.glob("*.log"))]
    trace = [gzip.decompress(p.read_bytes())[:80_000] for p in sorted(TRACE_DIR.glob("*.log.gz"))]
    manifests = _bundle_member("manifest.json") + _bundle_member("manifest.json", EVIDENCE)
    return {
        "text": text,
        "trace": trace,
        "bench_csv": _bundle_member("bench.csv"),
        "timings": [t[:40_000] for t in _bundle_member("timings.json") + _bundle_member("timings.json", EVIDENCE)],
        "manifest": manifests,
        "sniff": text[:4] + trace[:3] + manifests[:1],
        "gzip": [gzip.compress(t[:30_000]) for t in text[:4]],
        "archive": [b.read_bytes() for b in BUNDLES[:3] if b.stat().st_size < 200_000],
    }


def mutate(data: bytes, rng: random.Random, n: int | None = None) -> bytes:
    """1-4 random edits: flip bytes, insert a token or random bytes, delete or duplicate a range,
    or cut the input short."""
    b = bytearray(data)
    for _ in range(n or rng.randint(1, 4)):
        op = rng.randrange(7)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            for k in range(rng.randint(1, 8)):
                if i + k < len(b):
                    b[i + k] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i:i] = rng.choice(TOKENS)
        elif op == 2:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 3:
            del b[i:i + rng.randint(1, 200)]
        elif op == 4:
            j = min(len(b), i + rng.randint(1, 400))
            b[i:i] = b[i:j]
        elif op == 5:
            del b[i:]
        else:
            b[i:i + 1] = rng.choice(TOKENS)
    return bytes(b)


# -- targets: each takes bytes and must not raise past its boundary ----------------------------------

def _text(data: bytes) -> None:
    parse_text(io.BytesIO(data), CountingSink())


def _trace(data: bytes) -> None:
    parse_trace(io.BytesIO(data), CountingSink())


def _bench(data: bytes) -> None:
    parse_bench_csv(io.BytesIO(data), CountingSink())


def _timings(data: bytes) -> None:
    parse_timings(io.BytesIO(data), CountingSink())


def _manifest(data: bytes) -> None:
    parse_manifest(io.BytesIO(data), CountingSink())   # the host probe's reader: never raises
    try:
        d = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError:
        return  # read_manifest turns this into a BundleError; the JSON module is not under test
    try:
        m = Manifest.from_dict(d)
        m.to_json()
    except BundleError:
        pass


def _with_file(data: bytes, name: str, fn) -> None:
    d = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        p = d / name
        p.write_bytes(data)
        fn(p, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _sniff(data: bytes) -> None:
    _with_file(data, "f.log", lambda p, d: detect.sniff(p))


def _gzip(data: bytes) -> None:
    def run(p, d):
        detect.sniff(p)
        with detect.open_binary(p) as s:
            while s.read(1 << 16):
                pass
    _with_file(data, "f.log.gz", run)


_SMALL = archives.ArchiveLimits(max_total_bytes=64 * 2**20, max_entries=500, max_ratio=200, max_depth=3,
                                ratio_floor_bytes=8 * 2**20)


def _archive(data: bytes) -> None:
    def run(p, d):
        try:
            archives.extract(p, d / "out", archives.Budget(_SMALL))
        except archives.ArchiveError:
            pass
    _with_file(data, "b.tar.gz", run)


TARGETS = {"text": _text, "trace": _trace, "bench_csv": _bench, "timings": _timings, "manifest": _manifest,
           "sniff": _sniff, "gzip": _gzip, "archive": _archive}
