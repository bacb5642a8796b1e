"""Property tests for parse_text.

1. Arbitrary bytes never raise.
2. Splitting a log at a line boundary. A multi-line log record is one logging call, so what a
   split can do is defined per record:
   - a boundary *between* records (no record has lines on both sides): parsing the two parts
     gives exactly the rows of the whole (line numbers shifted, recompile_no renumbered);
   - a boundary *inside* a record R: every other record's rows are unchanged; R's rows come only
     from the part holding R's first line (cut short); the orphan tail in the other part makes
     no rows (at most a counted 'truncated' error).
   Both are checked for every boundary of several real fixtures.
"""
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text
from compilewatch.ingest.text.reader import RecordAssembler
from compilewatch.ingest.text.registry import parser_for

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "text"
SPLIT_FIXTURES = [
    "torch2.13_graph_breaks.log",
    "torch2.13_recompiles_verbose.log",
    "torch2.13_torchrun_2ranks.log",
    "issue114293_torch2.1_recompiles_constant.log",
    "pr97884_torch2.1dev_graph_break_inline_stdout.log",
    "torchdynamo1673_2022_cache_limit_unprefixed.log",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_raise(data):
    parse_text(io.BytesIO(data), CollectingSink())


_real_lines = (FIX / "torch2.13_all.log").read_bytes().splitlines(keepends=True)[:400]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_real_lines), st.binary(max_size=200),
                          st.sampled_from(_real_lines).map(lambda b: b[: len(b) // 2])), max_size=60))
def test_shuffled_and_cut_real_lines_never_raise(lines):
    sink = CollectingSink()
    parse_text(io.BytesIO(b"".join(lines)), sink)
    for table, rows in sink.rows.items():
        for r in rows:
            assert isinstance(r.get("line_no"), int)


def _parse(lines):
    sink = CollectingSink()
    parse_text(io.BytesIO(b"".join(lines)), sink)
    return sink


def _spans(lines):
    """(first, last) line number of every record we parse, from the assembler itself."""
    spans = []
    asm = RecordAssembler(parser_for,
                          lambda r: spans.append((r.start_line, r.line_nos[-1])), lambda *a: None)
    for i, raw in enumerate(lines, 1):
        asm.feed(i, raw.decode("utf-8", "replace").rstrip("\r\n"))
    asm.close()
    return spans


def _rows(sink, shift=0, renumber=0):
    out = []
    for table, rows in sorted(sink.rows.items()):
        for r in rows:
            r = dict(r, line_no=r["line_no"] + shift)
            if "recompile_no" in r:
                r["recompile_no"] += renumber
            out.append((table, r))
    return out


def _key(rows, drop=()):
    return sorted((t, repr(sorted((k, v) for k, v in r.items() if k not in drop))) for t, r in rows)


@pytest.mark.parametrize("name", SPLIT_FIXTURES)
def test_split_at_every_line_boundary(name):
    lines = (FIX / name).read_bytes().splitlines(keepends=True)
    want = _rows(_parse(lines))
    spans = _spans(lines)
    for k in range(len(lines) + 1):
        a, b = _parse(lines[:k]), _parse(lines[k:])
        a_rows = _rows(a)
        b_rows = _rows(b, shift=k, renumber=len(a.rows.get("recompiles", [])))
        cut = [sp for sp in spans if sp[0] <= k < sp[1]]
        if not cut:
            assert _key(a_rows + b_rows) == _key(want), f"split after line {k}"
            assert not b.errors or b.errors[0]["kind"] != "truncated"
            continue
        (s, e), = cut
        inside = lambda row: s <= row[1]["line_no"] <= e
        # recompile_no may differ by one after a cut recompile; everything else is exact
        assert _key([r for r in a_rows + b_rows if not inside(r)], drop=("recompile_no",)) == \
            _key([r for r in want if not inside(r)], drop=("recompile_no",)), f"split after {k} inside {s}-{e}"
        assert not [r for r in b_rows if inside(r)], f"orphan tail of record {s}-{e} made rows (split after {k})"
        assert [r for r in a_rows if r[1]["line_no"] == s], f"record {s}-{e} lost its head (split after {k})"
        orphan_errors = [x for x in b.errors if x["line_no"] + k <= e]
        assert all(x["kind"] == "truncated" for x in orphan_errors)
