"""Property tests (hypothesis) over real traces.

Splitting: ``TraceParser`` keeps a half-read payload, the str (intern) table and the per-file joins
between feeds, so feeding a log in two pieces cut at *any* line boundary must give exactly the records
of the whole. Parsing the two pieces as separate files (fresh state each) is a different question:
records that need an earlier record of the same file lose that context. What is correct then:

- a str-table index defined in the first piece resolves to None in the second, never to a wrong file
  (only co_filename of a compile known solely from its dynamo_start goes through the table);
- fields joined from earlier records (a recompile's reason and number, guard_failures.function, the
  rule that a restart reason already covered by a graph-break artifact is not counted again) may be
  missing or, for graph breaks, come from restart_reasons instead;
- a compile whose dynamo_start ends the first piece is reported by that piece as a compile (and a
  recompile) that never finished, and again, finished, by the second;
- every record that stands alone (a compile's metrics, cache events, guard failures, artifact graph
  breaks, limit hits) is the same, and a cut between records produces no errors.
"""
from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_support import FIXTURES, parse_bytes, read_log, split_lines

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.trace import TraceParser

LOGS = {name: read_log(FIXTURES / name) for name in ("recompile_limit.log.gz", "graph_break_recompile.log.gz")}
LINES = {name: split_lines(data) for name, data in LOGS.items()}
WHOLE = {name: parse_bytes(data) for name, data in LOGS.items()}
ENVELOPE_STARTS = {name: [i for i, ln in enumerate(lines) if ln[:1] == b"V"] for name, lines in LINES.items()}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _records(sink):
    return {t: list(v) for t, v in sink.rows.items() if v}, sink.errors


@SETTINGS
@given(st.binary(max_size=4000))
def test_arbitrary_bytes_never_raise(data):
    for by_lines in (False, True):
        sink = parse_bytes(data, by_lines=by_lines)
        assert all(e["line_no"] >= 1 for e in sink.errors)


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(LINES["recompile_limit.log.gz"]), st.binary(max_size=200),
                          st.sampled_from([b"\n", b"\r\n", b"\t\n", b"\x00" * 50, b"V", b"\t{\n"])), max_size=300))
def test_real_lines_shuffled_with_garbage_never_raise(lines):
    data = b"".join(lines)
    a, b = parse_bytes(data), parse_bytes(data, by_lines=True)
    assert _records(a) == _records(b)


@SETTINGS
@given(st.sampled_from(sorted(LOGS)), st.data())
def test_split_anywhere_with_carried_state_is_exact(name, data):
    lines = LINES[name]
    k = data.draw(st.integers(0, len(lines)))
    sink = CollectingSink()
    p = TraceParser(sink)
    p.feed(iter(lines[:k]))
    p.feed(iter(lines[k:]))
    p.close()
    assert _records(sink) == _records(WHOLE[name])


def _standalone(sink):
    r = sink.rows
    # recompiles that come from a compilation_metrics record (not from a dynamo_start left open at the
    # end of a piece) share that record's line
    metrics_lines = {c["line_no"] for c in r.get("compiles", []) if c.get("metrics_json")}
    return Counter(
        [("compiles", c["compile_id"], c["metrics_json"]) for c in r.get("compiles", []) if c.get("metrics_json")]
        + [("cache", c["compile_id"], c["cache"], c["outcome"], c["reason"]) for c in r.get("cache_events", [])]
        + [("guard", g["compile_id"], g["failed_entry"], g["raw"], g["category"], g["guard_key"])
           for g in r.get("guard_failures", [])]
        + [("break", b["compile_id"], b["reason"], b["break_key"], b["user_stack"])
           for b in r.get("graph_breaks", []) if b["source"] == "trace_artifact"]
        + [("limit", h["compile_id"], h["limit_name"], h["limit_value"], h["reason"]) for h in r.get("limit_hits", [])]
        + [("recompile", x["compile_id"], x["file"], x["line"], x["ts"]) for x in r.get("recompiles", [])
           if x["line_no"] in metrics_lines]
    )


@SETTINGS
@given(st.sampled_from(sorted(LOGS)), st.data())
def test_split_between_records_into_two_files(name, data):
    lines = LINES[name]
    k = data.draw(st.sampled_from(ENVELOPE_STARTS[name]))
    first, second = parse_bytes(b"".join(lines[:k])), parse_bytes(b"".join(lines[k:]))
    whole = WHOLE[name]
    assert first.errors == [] and second.errors == []
    assert _standalone(first) + _standalone(second) == _standalone(whole)
    # phases whose begin and end fall on one side are the same; none are invented
    phases = Counter((p["compile_id"], p["name"], p["start_us"], p["duration_us"])
                     for s in (first, second) for p in s.rows.get("compile_phases", []))
    assert not phases - Counter((p["compile_id"], p["name"], p["start_us"], p["duration_us"])
                                for p in whole.rows["compile_phases"])
    # a compile known only from dynamo_start: its file comes from the str table or stays unknown
    whole_files = {c["compile_id"].split("_")[0]: c["co_filename"] for c in whole.rows["compiles"]}
    for c in first.rows.get("compiles", []) + second.rows.get("compiles", []):
        if not c.get("metrics_json"):
            assert c["co_filename"] in (None, whole_files[c["compile_id"].split("_")[0]])


@SETTINGS
@given(st.sampled_from(sorted(LOGS)), st.data())
def test_split_inside_a_record_into_two_files(name, data):
    """A cut inside a payload damages that one record only, counted on each side."""
    lines = LINES[name]
    k = data.draw(st.integers(1, len(lines) - 1))
    first, second = parse_bytes(b"".join(lines[:k])), parse_bytes(b"".join(lines[k:]))
    kinds = Counter(e["kind"] for e in first.errors + second.errors)
    assert set(kinds) <= {"payload", "payload_md5"} and sum(kinds.values()) <= 2
    assert len(first.rows.get("compiles", [])) + len(second.rows.get("compiles", [])) >= len(WHOLE[name].rows["compiles"])


def test_interned_index_from_an_earlier_piece_resolves_to_none():
    lines = LINES["recompile_limit.log.gz"]
    k = max(i for i, ln in enumerate(lines) if b'{"dynamo_start"' in ln)
    alone = parse_bytes(lines[k])  # the dynamo_start of 0/1 (0/2 fails before it), stack naming file index 1
    (c,) = alone.rows["compiles"]
    assert (c["compile_id"], c["co_name"], c["co_filename"]) == ("0/1", "k", None)
    with_table = parse_bytes(b"".join(ln for ln in lines[:k] if b'{"str"' in ln) + lines[k])
    assert with_table.rows["compiles"][0]["co_filename"].endswith("recompile_limit.py")
