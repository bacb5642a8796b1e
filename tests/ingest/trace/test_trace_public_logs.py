"""Golden counts over the public tlparse test logs (pytorch/tlparse tests/, 2024-04..2025-08 nightlies),
read in place from ../shared/public_logs/tlparse and skipped when that folder is absent.

Every expected number comes from that folder's README.md / TLPARSE_TEST_EXPECTATIONS.md (written from
the logs by hand), and the md5 counts from `tlparse FILE --no-browser` 0.4.3 (its Stats line), so a
failure here means our reading disagrees with an independent one.
"""
from __future__ import annotations

from collections import Counter

import pytest
from trace_support import PUBLIC, parse_path

pytestmark = pytest.mark.skipif(not PUBLIC.is_dir(), reason=f"{PUBLIC} not present")

# name: (compiles rows, distinct frame/compile ids, recompiled ids, restarted ids, fail types,
#        guard-failure categories, graph breaks by source, tlparse fail_payload_md5)
EXPECT = {
    "graph_exec_order_tests__dedicated_log_torch_trace_rank_0_a74od7a1": (2, ["0/0", "0/1"], ["0/1"], [], {}, {"object_identity": 1}, {}, 2),
    "graph_exec_order_tests__dedicated_log_torch_trace_rank_1_fglwclht": (2, ["0/0", "0/1"], ["0/1"], [], {}, {"object_identity": 1}, {}, 0),
    "inputs__artifacts": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__autotune_with_compile_id": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__cache_hit_miss": (6, ["0/0", "1/0"], [], [], {}, {}, {}, 0),
    "inputs__cache_hit_miss@26fd753": (6, ["0/0", "1/0"], [], [], {}, {}, {}, 0),
    "inputs__chromium_events": (1, ["0/0"], [], [], {"BackendCompilerFailed": 1}, {}, {}, 0),
    "inputs__chromium_events@b8cae8f": (4, ["0/0", "1/0", "2/0"], [], ["0/0_1", "1/0_1"], {"BackendCompilerFailed": 1}, {}, {"trace_restart": 2}, 0),
    "inputs__collectives_parity__dedicated_log_torch_trace_rank_0": (4, ["0/0", "0/1", "0/2", "0/3"], ["0/1", "0/2", "0/3"], [], {}, {"object_identity": 3}, {}, 6),
    "inputs__comp_failure@e758e85": (1, ["0/0"], [], [], {"BackendCompilerFailed": 1}, {}, {}, 0),
    "inputs__comp_metrics": (3, ["0/0", "1/0", "2/0"], [], ["0/0_1", "1/0_1"], {}, {}, {"trace_restart": 2}, 0),
    "inputs__comp_metrics@5dc9d1a": (3, ["0/0", "1/0", "2/0"], [], ["0/0_1", "1/0_1"], {}, {}, {"trace_artifact": 2}, 0),
    "inputs__export": (0, [], [], [], {}, {}, {}, 1),
    "inputs__export@9f514bb": (0, [], [], [], {}, {}, {}, 1),
    "inputs__export@d2b9629": (0, [], [], [], {}, {}, {}, 1),
    "inputs__export_guard_added": (0, [], [], [], {}, {}, {}, 1),
    "inputs__inductor_provenance_aot_cuda_log": (1, [], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_aot_debug_handle_log": (1, [], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_aot_log": (1, [], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_aot_log_old": (1, [], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_extended_log": (1, [], [], [], {}, {}, {}, 1),
    "inputs__inductor_provenance_jit_cuda_log": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_jit_debug_handle_log": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__inductor_provenance_jit_log": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__links": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__multi_rank_logs__dedicated_log_torch_trace_rank_0": (1, ["0/0"], [], [], {"BackendCompilerFailed": 1}, {}, {}, 0),
    "inputs__multi_rank_logs__dedicated_log_torch_trace_rank_1": (15, [f"0/{i}" for i in range(15)], [f"0/{i}" for i in range(1, 15)], [], {}, {"size_mismatch": 105}, {}, 0),
    "inputs__multi_rank_logs__dedicated_log_torch_trace_rank_3": (7, [f"0/{i}" for i in range(7)], [f"0/{i}" for i in range(1, 7)], [], {}, {"size_mismatch": 21}, {}, 0),
    **{f"inputs__multi_rank_runtime__dedicated_log_torch_trace_rank_{r}": (4, ["0/0", "0/1", "0/2", "0/3"], ["0/1", "0/2", "0/3"], [], {}, {"object_identity": 3}, {}, md5)
       for r, md5 in ((0, 4), (1, 4), (2, 4), (3, 4), (4, 3))},
    "inputs__multi_rank_runtime__dedicated_log_torch_trace_rank_5": (2, ["0/0", "0/1"], ["0/1"], [], {}, {"object_identity": 1}, {}, 0),
    "inputs__multi_rank_schedule__dedicated_log_torch_trace_rank_0_6u3fubwl": (2, ["0/0", "1/0"], [], [], {}, {}, {}, 0),
    "inputs__multi_rank_schedule__dedicated_log_torch_trace_rank_1_n8zycf07": (2, ["0/0", "1/0"], [], [], {}, {}, {}, 1),
    "inputs__simple": (1, ["0/0"], [], [], {}, {}, {}, 0),
    # the oldest format (2024-04): no compilation_metrics at all; 3 dynamo_start [0/0] give one compile row
    "inputs__simple@eec75a5": (1, ["0/0"], [], [], {}, {}, {}, 0),
    "inputs__simple_corrupted_json": (1, ["0/0"], [], [], {}, {}, {}, 1),
}

RANKS = {
    "graph_exec_order_tests__dedicated_log_torch_trace_rank_0_a74od7a1": {0},
    "graph_exec_order_tests__dedicated_log_torch_trace_rank_1_fglwclht": {1},
    "inputs__multi_rank_runtime__dedicated_log_torch_trace_rank_4": {4},
    # the file name says rank_5, the envelopes say rank 1 (README note): we keep what the log says
    "inputs__multi_rank_runtime__dedicated_log_torch_trace_rank_5": {1},
    "inputs__multi_rank_schedule__dedicated_log_torch_trace_rank_1_n8zycf07": {0},
    "inputs__simple": {None},
}


def _path(name):
    return PUBLIC / f"tlparse__{name}.log"


def test_every_public_log_is_listed():
    on_disk = {p.name[len("tlparse__"):-len(".log")] for p in PUBLIC.glob("tlparse__*.log")}
    assert on_disk == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_public_log(name):
    n_compiles, ids, recompiled, restarted, fail_types, categories, breaks, md5 = EXPECT[name]
    sink = parse_path(_path(name))
    compiles = sink.rows.get("compiles", [])
    assert len(compiles) == n_compiles
    assert sorted({c["compile_id"].split("_")[0] for c in compiles if c["compile_id"]}) == sorted(ids)
    assert sorted(r["compile_id"].split("_")[0] for r in sink.rows.get("recompiles", [])) == sorted(recompiled)
    assert all(r["source"] == "trace" for r in sink.rows.get("recompiles", []))
    assert sorted(c["compile_id"] for c in compiles if c["attempt"]) == restarted
    assert dict(Counter(c.get("fail_type") for c in compiles if c.get("fail_type"))) == fail_types
    assert dict(Counter(g["category"] for g in sink.rows.get("guard_failures", []))) == categories
    assert dict(Counter(b["source"] for b in sink.rows.get("graph_breaks", []))) == breaks
    # same md5 verdicts as tlparse; a bad payload at the very end without a final newline is "truncated"
    errors = Counter(e["kind"] for e in sink.errors)
    assert errors["payload_md5"] + errors["truncated"] == md5
    assert set(errors) <= {"payload_md5", "truncated", "payload"}
    if name in RANKS:
        assert {c["rank"] for c in compiles} == RANKS[name]


def test_recompile_storm_guard_failures():
    """README: each recompile_reasons artifact lists one failure per previous cache entry, newest first."""
    sink = parse_path(_path("inputs__multi_rank_logs__dedicated_log_torch_trace_rank_1"))
    gf = [g for g in sink.rows["guard_failures"] if g["compile_id"] == "0/2"]
    assert [(g["failed_entry"], g["expected"], g["actual"]) for g in gf] == [("0/1", "3", "4"), ("0/0", "2", "4")]
    assert {g["raw"] for g in gf} == {"0/1: tensor 'x' size mismatch at index 0. expected 3, actual 4",
                                      "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4"}
    assert {(g["source_name"], g["dimension"], g["function"]) for g in sink.rows["guard_failures"]} == {("x", 0, "kernel")}
    recompiles = sink.rows["recompiles"]
    assert [r["recompile_no"] for r in recompiles] == list(range(1, 15))
    # guard_failures link to their recompile by recompile_no
    assert {g["recompile_no"] for g in gf} == {r["recompile_no"] for r in recompiles if r["compile_id"] == "0/2"}
    assert recompiles[0]["reason"] == "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"
    assert {r["function"] for r in recompiles} == {"kernel"}


def test_graph_break_artifacts_are_not_counted_twice():
    """comp_metrics@5dc9d1a has both a dynamo_graph_break_reason record and a restart_reasons entry for
    each of its two breaks: two breaks, taken from the artifacts (which carry the user location)."""
    sink = parse_path(_path("inputs__comp_metrics@5dc9d1a"))
    breaks = sink.rows["graph_breaks"]
    assert [(b["compile_id"], b["user_line"], b["user_function"]) for b in breaks] == [
        ("0/0", 10440, "fn"), ("1/0", 10442, "torch_dynamo_resume_in_fn_at_10440")]
    assert all(b["reason"].startswith("Unsupported: 'skip function graph_break") for b in breaks)
    assert all(b["break_key"].endswith(f"test_misc.py:{b['user_line']}") for b in breaks)
    assert all(b["gb_type"] is None for b in breaks)  # 2024 format: no gb_type yet


def test_restart_reasons_become_graph_breaks_without_artifacts():
    sink = parse_path(_path("inputs__comp_metrics"))
    breaks = sink.rows["graph_breaks"]
    assert [b["compile_id"] for b in breaks] == ["0/0_1", "1/0_1"]
    assert {b["reason"] for b in breaks} == {
        "'skip function graph_break in file /data/users/jjwu/a/pytorch/torch/_dynamo/decorators.py'"}
    assert len({b["break_key"] for b in breaks}) == 1  # same cause, path-free key


def test_cache_events():
    sink = parse_path(_path("inputs__cache_hit_miss"))
    ev = Counter((r["cache"], r["outcome"]) for r in sink.rows["cache_events"])
    assert ev == {("fx_graph", "miss"): 2, ("fx_graph", "hit"): 1, ("aotautograd", "bypass"): 3}
    bypass = [r for r in sink.rows["cache_events"] if r["outcome"] == "bypass"]
    assert all(r["reason"].startswith("Unsupported call_function target flex_attention") for r in bypass)
    assert {r["compile_id"] for r in bypass} == {"1/0"}
    old = parse_path(_path("inputs__cache_hit_miss@26fd753"))
    assert not any(r["cache"] == "aotautograd" for r in old.rows["cache_events"])  # README: none then


def test_failure_fields():
    sink = parse_path(_path("inputs__chromium_events"))
    (c,) = sink.rows["compiles"]
    assert c["fail_type"] == "BackendCompilerFailed"
    assert c["fail_reason"] == "backend='broken_backend' raised:\nRuntimeError: broken backend"
    assert c["co_name"] == "fn" and c["compiled_autograd_id"] is None
    old = parse_path(_path("inputs__comp_failure@e758e85"))
    # "<class 'torch._dynamo.exc.BackendCompilerFailed'>" in 2024-04: the bare name groups across versions
    assert old.rows["compiles"][0]["fail_type"] == "BackendCompilerFailed"
    assert "BackendCompilerFailed" in old.rows["compiles"][0]["metrics_json"]


def test_compile_phases_pair_begin_and_end():
    sink = parse_path(_path("inputs__simple"))
    phases = sink.rows["compile_phases"]
    assert phases and all(p["duration_us"] >= 0 for p in phases)
    names = Counter(p["name"] for p in phases)
    assert names["compile_file"] >= 1 and names["inductor_compile"] == 1


def test_corrupted_json_payload_is_counted_and_the_rest_still_lands():
    """simple_corrupted_json.log = simple.log with one chromium_event payload line deleted, so that
    payload's JSON is broken. Every envelope's JSON still decodes; the damaged record is counted once,
    as payload_md5 on its envelope's line (the JSON decode failure that follows is the same damage),
    and everything else is as in simple.log."""
    good = parse_path(_path("inputs__simple"))
    bad = parse_path(_path("inputs__simple_corrupted_json"))
    assert good.errors == []
    assert [(e["kind"], e["line_no"]) for e in bad.errors] == [("payload_md5", 13)]
    assert bad.metadata["trace_stats"]["envelopes"] == good.metadata["trace_stats"]["envelopes"] == 76
    for table in ("compiles", "cache_events"):
        assert len(bad.rows[table]) == len(good.rows[table])
    assert len(bad.rows["compile_phases"]) == len(good.rows["compile_phases"]) - 1


def test_unknown_event_kinds_are_counted_not_fatal():
    sink = parse_path(_path("inputs__collectives_parity__dedicated_log_torch_trace_rank_0"))
    stats = sink.metadata["trace_stats"]
    assert stats["events"]["compilation_metrics_runtime"] == 4  # tlparse: "unknown: 4"
    assert stats["envelopes"] == 504
