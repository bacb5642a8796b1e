"""Golden tests over our own real traces (tests/fixtures/trace/, CPU torch 2.13.0; the README there
gives the command behind each). Goldens: tests/ingest/trace/goldens/<name>.json, regenerated with

    .venv/bin/python -m tests.ingest.trace.regen_goldens

and reviewed as a diff. The named tests below pin the facts the goldens encode, so a careless
regeneration cannot silently accept a wrong count.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from trace_support import FIXTURES, GOLDENS, fixture_logs, parse_path, summary


@pytest.mark.parametrize("log", fixture_logs(), ids=lambda p: p.name)
def test_golden(log):
    golden = GOLDENS / (log.name.split(".log")[0] + ".json")
    assert golden.exists(), "run: .venv/bin/python -m tests.ingest.trace.regen_goldens"
    assert json.loads(json.dumps(summary(parse_path(log)))) == json.loads(golden.read_text(encoding="utf-8"))


def test_fixtures_parse_clean():
    for log in fixture_logs():
        sink = parse_path(log)
        assert sink.errors == [], log.name
        assert sink.metadata["torch_version"] == "2.13.0+cpu"
        assert sink.metadata["trace_stats"]["unknown_events"] == {}


def test_graph_breaks_and_recompiles_torch_2_13():
    sink = parse_path(FIXTURES / "graph_break_recompile.log.gz")
    breaks = sink.rows["graph_breaks"]
    # print and .item() break f on its first compile and again on its shape recompile; the same breaks
    # are in restart_reasons, which must not add rows
    assert [(b["compile_id"], b["source"], b["gb_code"], b["user_line"]) for b in breaks] == [
        ("0/0", "trace_artifact", "GB0059", 11), ("1/0", "trace_artifact", "GB0124", 12),
        ("0/1", "trace_artifact", "GB0059", 11), ("1/1", "trace_artifact", "GB0124", 12)]
    assert breaks[0]["gb_type"] == "Failed to trace builtin operator"
    assert breaks[1]["gb_type"] == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert "capture_scalar_outputs" in breaks[1]["hints"]
    assert breaks[0]["explanation"].startswith("Dynamo does not know how to trace builtin operator `print`")
    assert all(b["user_file"].endswith("graph_break_recompile.py") for b in breaks)
    assert len({b["break_key"] for b in breaks}) == 2
    restarts = [c for c in sink.rows["compiles"] if c["restart_reasons"] not in (None, "[]")]
    assert len(restarts) == 4

    rec = sink.rows["recompiles"]
    assert [(r["compile_id"], r["function"]) for r in rec] == [
        ("0/1_1", "f"), ("1/1_1", "torch_dynamo_resume_in_f_at_11"), ("2/1", "torch_dynamo_resume_in_f_at_12"),
        ("3/1", "g")]
    gf = sink.rows["guard_failures"]
    assert Counter(g["category"] for g in gf) == {"size_mismatch": 3, "constant": 1}
    const = [g for g in gf if g["category"] == "constant"][0]
    assert (const["failed_entry"], const["source_name"], const["expected"]) == ("3/0", "scale", "2")
    assert const["raw"].startswith("3/0: scale == 2")
    assert "User stack trace" not in const["raw"]
    assert {c["compile_id"]: c["is_recompile"] for c in sink.rows["compiles"]}["3/1"] is True


def test_recompile_limit_hit():
    sink = parse_path(FIXTURES / "recompile_limit.log.gz")
    (hit,) = sink.rows["limit_hits"]
    assert (hit["compile_id"], hit["limit_name"], hit["limit_value"], hit["function"]) == ("0/2", "recompile_limit", 2, "k")
    assert hit["reason"].startswith("Dynamo recompile limit exceeded")
    failed = [c for c in sink.rows["compiles"] if c["fail_type"]]
    assert [(c["compile_id"], c["fail_type"]) for c in failed] == [("0/2", "Unsupported")]
    # one recompile_reasons entry is logged as plain text, two as a JSON list
    assert [(g["compile_id"], g["failed_entry"]) for g in sink.rows["guard_failures"]] == [
        ("0/1", "0/0"), ("0/2", "0/1"), ("0/2", "0/0")]
    assert [r["recompile_no"] for r in sink.rows["recompiles"]] == [1, 2]


def test_inductor_cache_events_and_phases():
    sink = parse_path(FIXTURES / "inductor_cache.log.gz")
    ev = [(r["cache"], r["outcome"]) for r in sink.rows["cache_events"]]
    assert Counter(ev) == {("fx_graph", "miss"): 1, ("aotautograd", "miss"): 1, ("fx_graph", "hit"): 1,
                           ("aotautograd", "hit"): 1}
    phases = sink.rows["compile_phases"]
    names = Counter(p["name"] for p in phases)
    assert names["entire_frame_compile"] == 2 and names["inductor_compile"] >= 1
    frame = [p for p in phases if p["name"] == "entire_frame_compile"]
    compiles = sink.rows["compiles"]
    # the chromium span and compilation_metrics agree on how long the frame compile took
    for p, c in zip(frame, compiles):
        assert abs(p["duration_us"] / 1e6 - c["entire_frame_compile_time_s"]) < 0.05


def test_compiled_autograd_ids():
    sink = parse_path(FIXTURES / "compiled_autograd.log.gz")
    compiles = sink.rows["compiles"]
    assert [(c["compile_id"], c["compiled_autograd_id"], c["co_name"]) for c in compiles] == [
        ("0/0_1", None, "step"), ("!0/1/0", 0, "forward"), ("2/0", None, "torch_dynamo_resume_in_step_at_15"),
        ("0/1_1", None, "step"), ("!1/3/0", 1, "forward")]
    # the compiled-autograd graphs are compiles of their own frames, not recompiles of the step
    assert [r["compile_id"] for r in sink.rows["recompiles"]] == ["0/1_1"]
    assert {b["gb_code"] for b in sink.rows["graph_breaks"]} == {"GB0123"}
    # phases keep our compile_id format, not torch's args string ("!0" for a compiled-autograd-only id)
    ca = {p["compile_id"] for p in sink.rows["compile_phases"] if p["compile_id"].startswith("!")}
    assert ca == {"!0/-/-", "!0/1/0", "!1/-/-", "!1/3/0"}


def test_graph_break_that_skips_the_frame():
    sink = parse_path(FIXTURES / "graph_break_skip.log.gz")
    (b,) = sink.rows["graph_breaks"]
    assert b["reason"].startswith("Failed to handle graph break gracefully. Skipping the function")
    assert (b["gb_type"], b["gb_code"], b["user_line"], b["user_function"]) == (
        "Failed to trace builtin operator", "GB0059", 13, "h")  # the print line
    (c,) = sink.rows["compiles"]
    assert (c["compile_id"], c["fail_type"], c["restart_reasons"]) == ("0/0", "Unsupported", "[]")
