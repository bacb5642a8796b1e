"""The TORCH_LOGS reader reads a file object in blocks (each decoded once, its lines fed through the
assembler's many-lines path, RecordAssembler.feed_lines), and any other iterable line by line
(RecordAssembler.feed): both must give the same rows, errors, line numbers and record count,
wherever the block edges fall. Checked on every real text log (the text
fixtures, every bundle's torch_logs.txt), with blocks small enough that each log crosses many of
them, and on each log damaged the ways copies damage it (CRLF lines, a NUL byte, bytes that are not
UTF-8, a cut last line)."""
from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from compilewatch.ingest import text as text_reader
from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text

REPO = Path(__file__).resolve().parents[3]
PUBLIC = (REPO / ".." / "shared" / "public_logs").resolve()


def _real_text_logs() -> list[tuple[str, bytes]]:
    logs = [(p.name, p.read_bytes()) for p in sorted((REPO / "tests" / "fixtures" / "text").glob("*.log"))]
    for archive in sorted(REPO.glob("sample_logs/**/*.tar.gz")) + sorted(REPO.glob("tests/fixtures/**/*.tar.gz")):
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith("torch_logs.txt"):
                    data = tf.extractfile(m).read()
                    logs.append((f"{archive.relative_to(REPO)}:{m.name}", data))
    if PUBLIC.is_dir():  # the public logs are traces today; any TORCH_LOGS text among them is checked too
        for p in sorted(PUBLIC.rglob("*")):
            data = p.read_bytes() if p.is_file() else b""
            data = gzip.decompress(data) if p.suffix == ".gz" else data
            if b"[__" in data and b'{"' not in data[:4096]:
                logs.append((p.name, data))
    return [(name, data) for name, data in logs if data.strip()]


LOGS = _real_text_logs()


def _damaged(data: bytes) -> bytes:
    lines = io.BytesIO(data).readlines()
    out = []
    for i, ln in enumerate(lines):
        if i % 53 == 3:
            ln = ln.replace(b"\n", b"\r\n")
        if i % 211 == 7:
            ln = ln[:5] + b"\x00" + ln[5:]
        if i % 307 == 11:
            ln = ln[:9] + b"\xff" + ln[9:]
        out.append(ln)
    return b"".join(out)[:-37]


def _everything(data: bytes, by_lines: bool):
    sink = CollectingSink()
    parse_text(iter(io.BytesIO(data).readlines()) if by_lines else io.BytesIO(data), sink)
    return {t: list(v) for t, v in sink.rows.items() if v}, sink.errors, sink.metadata


def test_there_are_many_real_text_logs():
    assert len(LOGS) >= 60


@pytest.mark.parametrize("chunk", [97, 4096, 1 << 20])
def test_blocks_read_as_lines(chunk, monkeypatch):
    monkeypatch.setattr(text_reader, "_CHUNK", chunk)
    rows = 0
    for name, data in LOGS:
        for variant in (data, _damaged(data)):
            by_blocks = _everything(variant, by_lines=False)
            assert by_blocks == _everything(variant, by_lines=True), name
            rows += sum(len(v) for v in by_blocks[0].values())
    assert rows > 1000   # the logs are real logs with records in them, not empty
