"""The envelope reader reads a file object in blocks (a run of payload lines is one slice of a
block), and any other iterable line by line: both must give the same envelopes, payloads, errors and
line numbers, wherever the block edges fall (inside a payload line, between a payload and its
envelope, inside an envelope line). Checked on real traces, with blocks small enough that every log
crosses hundreds of them, and on a real trace damaged the ways editors and cut copies damage it."""
from __future__ import annotations

import io

import pytest
from trace_support import FIXTURES, PUBLIC, parse_bytes, read_back, read_log

from compilewatch.ingest.trace import envelope

LOGS = [FIXTURES / "recompile_limit.log.gz", FIXTURES / "graph_break_recompile.log.gz",
        PUBLIC / "tlparse__inputs__artifacts.log", PUBLIC / "tlparse__inputs__chromium_events.log"]


def _everything(sink):
    return ({t: v for t, v in read_back(sink.rows).items() if v}, sink.errors, sink.metadata.get("trace_stats"))


def _damaged(data: bytes) -> bytes:
    lines = io.BytesIO(data).readlines()
    out = []
    for i, ln in enumerate(lines):
        if i % 97 == 5 and ln[:1] == b"\t":
            out.append(b"\n")                       # a blank line inside a payload (trailing tab stripped)
        if i % 211 == 7 and ln[:1] == b"\t":
            continue                                # a payload line lost: that payload fails its md5
        if i % 389 == 11:
            out.append(b"\tstray payload line\n")  # payload line with no envelope announcing one
        out.append(ln.replace(b"\n", b"\r\n") if i % 53 == 3 else ln)
    return b"".join(out)[:-37]                      # cut inside the last record, no final newline


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("chunk", [1, 61, 4096])
def test_blocks_read_as_lines(path, chunk, monkeypatch):
    if not path.exists():
        pytest.skip(f"{path.name} not present")
    data = read_log(path)
    monkeypatch.setattr(envelope, "_CHUNK", chunk)
    for variant in (data, _damaged(data)):
        by_blocks = parse_bytes(variant)
        by_lines = parse_bytes(variant, by_lines=True)
        assert _everything(by_blocks) == _everything(by_lines)
        assert by_blocks.rows   # the logs are real traces, not empty
