"""Artifact payloads compressed on a helper thread reach the sink exactly as compressing them inline
does: the same rows, in the same order, on real traces; and the queue waiting for the helper stays
bounded in bytes."""
from __future__ import annotations

import base64
import zlib

import pytest

from compilewatch.ingest.trace import compressor
from compilewatch.ingest.trace.compressor import Compressor
from trace_support import fixture_logs, parse_bytes, read_back, read_log

LOGS = [p for p in fixture_logs() if p.name in ("deep_dive.log.gz", "graph_break_recompile.log.gz")]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_threaded_and_inline_compression_give_the_same_rows_in_order(log, monkeypatch):
    data = read_log(log)
    monkeypatch.setattr(compressor, "INLINE_BYTES", 1 << 60)    # everything inline
    inline = parse_bytes(data)
    monkeypatch.setattr(compressor, "INLINE_BYTES", 0)          # everything through the helper
    monkeypatch.setattr(compressor, "MAX_PENDING_BYTES", 50_000)  # and the parser often waiting
    threaded = parse_bytes(data)
    assert len(inline.rows["artifacts"]) > 30
    assert read_back(threaded.rows) == read_back(inline.rows)
    big = max(inline.rows["artifacts"], key=lambda r: r["size_bytes"])
    assert len(zlib.decompress(base64.b64decode(big["payload_z"]))) == big["size_bytes"] > 1000


def test_waiting_rows_stay_under_the_bound_and_flush_passes_them_all(monkeypatch):
    monkeypatch.setattr(compressor, "INLINE_BYTES", 0)
    monkeypatch.setattr(compressor, "MAX_PENDING_BYTES", 100_000)
    payloads = [read_log(p) for p in LOGS]
    seen, peak = [], 0

    class Sink:
        def row(self, table, row):
            seen.append(row["i"])

    c = Compressor(Sink())
    for i in range(40):
        c.row("artifacts", {"i": i}, "payload_z", payloads[i % 2][: 20_000 + i * 997])
        peak = max(peak, c._pending_bytes)
    c.flush()
    assert seen == list(range(40))
    assert peak <= 100_000 + 20_000 + 40 * 997
