"""parse_text on the real fixtures: exact records, prefixes, interleaving, bad bytes."""
import calendar
import io
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "text"


def parse_bytes(data: bytes) -> CollectingSink:
    sink = CollectingSink()
    parse_text(io.BytesIO(data), sink)
    return sink


def parse(name: str) -> CollectingSink:
    return parse_bytes((FIX / name).read_bytes())


def test_213_graph_breaks_structured_fields():
    gbs = parse("torch2.13_graph_breaks.log").rows["graph_breaks"]
    first = gbs[0]
    assert first["line_no"] == 1 and first["compile_id"] == "0/0" and first["rank"] is None
    assert first["gb_type"] == "Failed to trace builtin operator"
    assert first["gb_code"] == "GB0059"
    assert first["explanation"].startswith("Dynamo does not know how to trace builtin operator `print`")
    assert len(json.loads(first["hints"])) == 3  # three Hint: lines, stored as a JSON list
    assert first["user_file"].endswith("prog_graph_breaks.py") and first["user_line"] == 4
    assert first["user_function"] == "helper"
    assert first["break_key"] == "Failed to trace builtin operator @ prog_graph_breaks.py:4"
    assert first["source"] == "text" and first["nested"] is False
    # the duplicate-suppressed report of the same break is a row too, with the same key
    assert gbs[1]["break_key"] == first["break_key"] and gbs[1]["user_stack"] is None
    types = Counter(g["gb_type"] for g in gbs)
    assert types["Data-dependent branching"] == 1
    assert types["Call to `torch._dynamo.graph_break()`"] == 3
    nested = [g for g in gbs if g["nested"]]
    assert len(nested) == 1
    assert nested[0]["gb_type"] == "Graph break under GenericContextWrappingVariable"
    assert nested[0]["gb_code"] == "GB0066" and nested[0]["user_function"] == "in_ctx"


def test_213_recompile_storm_and_categories():
    sink = parse("torch2.13_recompiles.log")
    recs = sink.rows["recompiles"]
    assert [r["recompile_no"] for r in recs] == list(range(1, len(recs) + 1))
    assert Counter(r["function"] for r in recs)["f"] == 8
    cats = Counter(g["category"] for g in sink.rows["guard_failures"])
    assert set(cats) == {"constant", "size_mismatch", "global_state", "dtype", "requires_grad",
                         "length", "object_identity"}
    gf = sink.rows["guard_failures"]
    # every guard failure links to its recompile, and carries the failing cache entry
    nos = {r["recompile_no"]: r for r in recs}
    assert all(g["recompile_no"] in nos and g["function"] == nos[g["recompile_no"]]["function"] for g in gf)
    first = gf[0]
    assert first["failed_entry"] == "0/0" and first["guard_key"] == "constant:mode"
    assert first["expected"] == "'a'" and first["line_no"] == 3
    lim = sink.rows["limit_hits"]
    assert [(h["limit_name"], h["limit_value"], h["function"], h["line"]) for h in lim] == \
        [("recompile_limit", 8, "f", 3)]
    assert lim[0]["reason"].startswith("0/7: mode == 'h'")


def test_recompiles_verbose_lists_every_entry():
    plain = parse("torch2.13_recompiles.log").rows
    verbose = parse("torch2.13_recompiles_verbose.log").rows
    assert len(verbose["recompiles"]) == len(plain["recompiles"])
    assert [g["guard_key"] for g in verbose["guard_failures"]] == [g["guard_key"] for g in plain["guard_failures"]]


def test_old_prefix_and_timestamp():
    recs = parse("issue110325_torch2.2dev_recompiles_oldprefix.log").rows["recompiles"]
    assert recs[0]["ts"] == calendar.timegm((2023, 11, 6, 14, 54, 8, 0, 0, 0)) + 0.549
    assert recs[0]["compile_id"] is None and recs[0]["line"] == 284


def test_glog_timestamp_has_month_day_time():
    rec = parse("issue163329_torch2.9_recompiles_objid.log").rows["recompiles"][0]
    t = time.gmtime(rec["ts"])
    assert (t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec) == (9, 19, 16, 15, 59)


def test_tuple_form_21():
    sink = parse("issue99091_torch2.1dev_recompiles_tuple.log")
    assert [g["raw"] for g in sink.rows["guard_failures"]] == [f"L['t'] == {i}" for i in range(4)]
    assert sink.rows["recompiles"][0]["function"] == "step" and sink.rows["recompiles"][0]["line"] is None
    assert sink.errors == []
    vals = parse("pr110928_torch2.2dev_recompiles_tuple_values.log").rows["guard_failures"]
    assert [(g["category"], g["actual"]) for g in vals] == [
        ("other", None), ("object_identity", "{'id': 140040114487792}"),
        ("object_identity", "{'id': 140040124395392}"), ("constant", "1"), ("size_mismatch", "5")]


def test_windows_paths_and_cache_size_limit():
    hit = parse("comfyui_mochi44_torch2.5_windows_cache_limit.log").rows["limit_hits"][0]
    assert hit["limit_name"] == "cache_size_limit" and hit["compile_id"] == "1/8"
    assert hit["file"].startswith("G:\\ComfyUI_windows_portable") and hit["line"] == 320


def test_unprefixed_continuations_2022():
    hit = parse("torchdynamo1673_2022_cache_limit_unprefixed.log").rows["limit_hits"][0]
    assert (hit["function"], hit["line"]) == ("forward", 284)
    assert hit["reason"] == "tensor 'x' strides mismatch at index 0. expected 562500, actual 2447991"


def test_graph_break_forms_before_27():
    old = parse("pr97884_torch2.1dev_graph_break_inline_stdout.log").rows["graph_breaks"][0]
    assert old["reason"] == "call_function BuiltinVariable(iadd) [ConstantVariable(tuple), TupleVariable()] {}"
    assert old["user_line"] == 1114 and old["user_file"].endswith("modeling_bart.py")
    bare = parse("bnb1578_torch2.6_graph_break_reason_bare.log").rows["graph_breaks"][0]
    assert bare["reason"] == "Unsupported: call_method UserDefinedObjectVariable(Params4bit) t [] {}"
    assert (bare["user_line"], bare["user_function"]) == (483, "forward")
    assert bare["break_key"] == "Unsupported: call_method UserDefinedObjectVariable(Params4bit) t [] {} @ modules.py:483"
    rank = parse("issue107865_torch2.1dev_rank_oldprefix_graph_break.log").rows["graph_breaks"][0]
    assert (rank["rank"], rank["compile_id"]) == (0, "12/21")
    assert rank["reason_norm"] == "call_function partial in skip_files functools.py"


def test_record_cut_by_excerpt_is_counted_not_lost():
    sink = parse("issue126722_torch2.4dev_graph_break_traceback_cut.log")
    assert [e["kind"] for e in sink.errors] == ["truncated"]
    gb = sink.rows["graph_breaks"][0]
    assert (gb["user_function"], gb["user_line"], gb["reason"]) == ("h", 18, None)


def test_torchrun_ranks():
    sink = parse("torch2.13_torchrun_2ranks.log")
    assert sorted(g["rank"] for g in sink.rows["graph_breaks"]) == [0, 1]
    assert sorted(r["rank"] for r in sink.rows["recompiles"]) == [0, 1]
    assert sink.errors == []


def _rows_without_line_no(sink):
    return {t: sorted(repr(sorted((k, v) for k, v in r.items() if k not in ("line_no", "recompile_no")))
                      for r in rows) for t, rows in sink.rows.items()}


def test_two_processes_interleaved_line_by_line():
    a = (FIX / "torch2.13_graph_breaks.log").read_bytes().splitlines(keepends=True)
    b = (FIX / "torch2.13_recompiles.log").read_bytes().splitlines(keepends=True)
    mixed = []
    for i in range(max(len(a), len(b))):
        mixed += a[i:i + 1] + b[i:i + 1]
    both = parse_bytes(b"".join(mixed))
    want = CollectingSink()
    parse_text(io.BytesIO(b"".join(a)), want)
    parse_text(io.BytesIO(b"".join(b)), want)
    assert _rows_without_line_no(both) == _rows_without_line_no(want)
    assert both.errors == []


def test_crlf_and_missing_final_newline_change_nothing():
    raw = (FIX / "torch2.13_all.log").read_bytes()
    base = parse_bytes(raw)
    assert parse_bytes(raw.replace(b"\n", b"\r\n")).rows == base.rows
    assert parse_bytes(raw.rstrip(b"\n")).rows == base.rows


def test_non_utf8_and_nul_are_counted_and_the_rest_parses():
    raw = (FIX / "issue110325_torch2.2dev_recompiles_oldprefix.log").read_bytes()
    lines = raw.splitlines(keepends=True)
    lines[2] = lines[2].replace(b"expected 20", b"expected \xff20")
    lines[4] = lines[4][:30] + b"\x00" + lines[4][30:]
    sink = parse_bytes(b"".join(lines))
    assert [e["kind"] for e in sink.errors] == ["encoding", "binary"]
    assert [e["line_no"] for e in sink.errors] == [3, 5]
    assert len(sink.rows["recompiles"]) == 3 and len(sink.rows["guard_failures"]) == 9


def test_plain_output_is_not_an_error_but_a_cut_prefix_is():
    sink = parse_bytes(b"epoch 1 loss 0.3\n[2023-11-06 14:54\nV0703 10:34:13.27\nhello\n")
    assert [(e["line_no"], e["kind"]) for e in sink.errors] == [(2, "glog"), (3, "glog")]
    assert not sink.rows


@pytest.mark.parametrize("name", ["torch2.13_all.log", "torch2.13_verbose_dynamo.log",
                                  "issue114293_torch2.1_recompiles_constant.log"])
def test_fixtures_parse_without_errors(name):
    assert parse(name).errors == []


def test_loop_skip_and_accumulated_limit_213():
    sink = parse("torch2.13_loop_skip_accumulated_limit.log")
    gb = sink.rows["graph_breaks"][0]
    assert (gb["gb_type"], gb["gb_code"], gb["nested"]) == ("graph break in loop", "GB7000", True)
    assert gb["user_line"] == 6 and gb["break_key"] == "graph break in loop @ prog_loop_skip_accumulated_limit.py:6"
    hit = sink.rows["limit_hits"][0]
    assert (hit["limit_name"], hit["limit_value"], hit["function"]) == ("accumulated_recompile_limit", 3, "g")


# Formats no fixture here shows, built from the format strings in PyTorch's source (cited per
# case) with a real glog prefix: evidence that the shape is handled, not a real log.
GLOG = "V0520 14:53:14.136000 1398 torch/_dynamo/convert_frame.py:711] [1/0] [__graph_breaks] "


def _glog(*msgs):
    return "".join(GLOG + m + "\n" for m in msgs).encode()


def test_source_only_graph_break_skip_24():
    # torch 2.3/2.4 convert_frame.py (PR #122684): "Graph break: skip: from user code at:\n%s", exc_info=True
    sink = parse_bytes(_glog(
        "Graph break: skip: from user code at:",
        '  File "/home/u/model.py", line 31, in forward',
        "    return self.prop",
        "Traceback (most recent call last):",
        '  File "/x/torch/_dynamo/convert_frame.py", line 650, in _compile_inner',
        "    out_code = transform_code_object(code, transform)",
        "torch._dynamo.exc.Unsupported: missing: LOAD_ATTR property",
    ))
    gb = sink.rows["graph_breaks"][0]
    assert gb["reason"] == "skip: missing: LOAD_ATTR property"
    assert (gb["user_file"], gb["user_line"], gb["user_function"]) == ("/home/u/model.py", 31, "forward")
    assert gb["break_key"] == "skip: missing: LOAD_ATTR property @ model.py:31"


def test_source_only_cannot_resume_skip_213():
    # torch 2.13 convert_frame.py: "Graph break: torch.compile cannot properly resume from this
    # graph break, which results in a skip.\ntorch.compile will skip tracing the frame ..."
    sink = parse_bytes(_glog(
        "Graph break: torch.compile cannot properly resume from this graph break, which results in a skip.",
        "torch.compile will skip tracing the frame f (/home/u/m.py line 3) and fall back to eager.",
        "The graph break occurred in the following user code:",
        '  File "/home/u/m.py", line 7, in f',
        "    with Ctx():",
    ))
    gb = sink.rows["graph_breaks"][0]
    assert gb["reason"].startswith("skip: torch.compile cannot properly resume")
    assert (gb["user_line"], gb["user_function"]) == (7, "f")


def test_source_only_recompiles_verbose_multi_guard_entry():
    # guards.py get_and_maybe_log_recompilation_reasons (2.2+): "guard N failures:" then every
    # failing guard of that entry, textwrap.indent(reason, "- "); only the first carries "0/0:"
    text = "".join(
        "V0101 00:00:00.000000 7 torch/_dynamo/guards.py:1] [0/2] [__recompiles_verbose] " + m + "\n" for m in [
            "Recompiling function f in /x/m.py:3",
            "    triggered by the following guard failure(s):",
            "    guard 0 failures:",
            "    - 0/1: tensor 'x' size mismatch at index 0. expected 4, actual 8",
            "    - tensor 'x' dtype mismatch. expected Float, actual Half",
            "",
            "    guard 1 failures:",
            "    - 0/0: len(xs) == 2",
        ])
    gf = parse_bytes(text.encode()).rows["guard_failures"]
    assert [(g["failed_entry"], g["category"]) for g in gf] == [
        ("0/1", "size_mismatch"), ("0/1", "dtype"), ("0/0", "length")]


@pytest.mark.parametrize("header, expected", [
    ("Recompiling function forward in /x/m.py:221", ("forward", "/x/m.py", 221)),
    ("Recompiling function f in C:\\u\\m.py:7  ", ("f", "C:\\u\\m.py", 7)),
    ("Recompiling function f in m.py:12:3", ("f", "m.py:12", 3)),          # only the last ":N" is the line
    ("Recompiling function f in g in /x.py:5", ("f", "g in /x.py", 5)),    # the first " in " ends the name
    ("Recompiling function <lambda> in <string>", ("<lambda>", "<string>", None)),
    ("Recompiling function f in /x.py:  ", ("f", "/x.py:", None)),
    ("Recompiling function f in /x.py:a1", ("f", "/x.py:a1", None)),
])
def test_recompile_header_splits_name_file_and_line(header, expected):
    rows = parse_bytes(_glog(header, "    triggered by the following guard failure(s):", "    - 0/0: x == 1")).rows
    rc = rows["recompiles"][0]
    assert (rc["function"], rc["file"], rc["line"]) == expected


def test_torchrun_tee_prefix_and_compile_id_attempts():
    # torchrun --tee puts "[default0]:" before each line; compile ids may carry an attempt "_1"
    raw = (FIX / "torch2.13_torchrun_2ranks.log").read_bytes()
    teed = raw.replace(b"[rank0]:", b"[default0]:").replace(b"] [0/0] [__graph_breaks]", b"] [0/0_1] [__graph_breaks]")
    sink = parse_bytes(teed)
    assert sorted(g["rank"] for g in sink.rows["graph_breaks"]) == [0, 1]
    assert {g["compile_id"] for g in sink.rows["graph_breaks"]} == {"0/0_1"}
    assert sink.errors == []


@pytest.mark.parametrize("name", ["torch2.13_all.log", "torch2.13_torchrun_2ranks.log",
                                  "pr97884_torch2.1dev_graph_break_inline_stdout.log"])
def test_line_iterator_and_block_reader_agree(name):
    # a file object is read in blocks; anything else is iterated line by line: same records
    raw = (FIX / name).read_bytes()
    raw = raw.replace(b"expected", b"expected \xff", 1)  # one bad line takes the per-line path
    blocks, lines = CollectingSink(), CollectingSink()
    parse_text(io.BytesIO(raw), blocks)
    parse_text(iter(raw.splitlines(keepends=True)), lines)
    assert blocks.rows == lines.rows and blocks.errors == lines.errors
