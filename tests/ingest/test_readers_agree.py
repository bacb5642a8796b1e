"""The TORCH_LOGS text reader and the TORCH_TRACE reader tell the same story: on every real bundle
that carries both logs (sample_logs and the fixture bundles), the same graph-break keys with the
same counts, and the same recompiled functions the same number of times. They share one reader
of each format fact (ingest/formats); this is the check that they stay in step. (Seen before the
fix: the trace counted Dynamo's restarted analyses, e.g. TensorifyScalarRestartAnalysis, as breaks.)"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text
from compilewatch.ingest.trace import parse_trace
from compilewatch.ingest.units import expand

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted(REPO.glob("sample_logs/**/*.tar.gz")) + sorted(REPO.glob("tests/fixtures/**/*.tar.gz"))


def _rows(paths, parse) -> CollectingSink:
    sink = CollectingSink()
    for p in paths:
        with detect.open_binary(p) as f:
            parse(f, sink)
    return sink


def test_there_are_bundles_with_both_logs():
    assert len(BUNDLES) >= 10


@pytest.mark.parametrize("bundle", BUNDLES, ids=[str(b.relative_to(REPO)) for b in BUNDLES])
def test_text_and_trace_agree(bundle, tmp_path):
    units, failures = expand([bundle], tmp_path)
    assert not failures
    text = [u.path for u in units if u.role == "torch_logs"]
    trace = [u.path for u in units if u.role == "torch_trace"]
    if not (text and trace):
        pytest.skip("this bundle carries one of the two logs")
    t, tr = _rows(text, parse_text), _rows(trace, parse_trace)
    assert Counter(r["break_key"] for r in t.rows["graph_breaks"]) == \
        Counter(r["break_key"] for r in tr.rows["graph_breaks"])
    assert Counter(r["function"] for r in t.rows["recompiles"]) == Counter(r["function"] for r in tr.rows["recompiles"])
