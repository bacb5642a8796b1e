"""Three shapes users paste into issues and CI logs, once dropped by the text reader, now parsed
(real public snippets: tests/fixtures/text/README.md names the source of each). What is there is
kept; a location that cannot be read is stored as unknown rather than losing the record."""
from __future__ import annotations

import io
import json
from pathlib import Path

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "text"


def parse(name: str) -> CollectingSink:
    sink = CollectingSink()
    parse_text(io.BytesIO((FIX / name).read_bytes()), sink)
    return sink


def test_a_glog_prefix_shortened_by_hand_keeps_its_record():
    s = parse("issue128071_torch2.6_shortened_prefix_recompiles_verbose.log")
    assert s.errors == []
    (rec,) = s.rows["recompiles"]
    assert rec["function"] == "torch_dynamo_resume_in_forward_at_172" and rec["compile_id"] == "16/8"
    assert rec["reason"].startswith("16/7: L['self']._modules['mixer']")
    assert len(s.rows["guard_failures"]) == 3


def test_a_graph_break_whose_line_is_not_a_number_is_kept_with_the_line_unknown():
    s = parse("pytorch_test_error_messages_graph_break_line_N.log")
    assert s.errors == []
    (gb,) = s.rows["graph_breaks"]
    assert gb["gb_type"] == "Call to `torch._dynamo.graph_break()`" and gb["gb_code"] == "GB0025"
    assert (gb["user_file"], gb["user_line"]) == ("test_error_messages.py", None)
    assert json.loads(gb["hints"]) == ["Remove the `torch._dynamo.graph_break()` call."]
    assert gb["break_key"] == "Call to `torch._dynamo.graph_break()` @ test_error_messages.py"


def test_the_standalone_torchdynamo_prefix_without_a_time():
    s = parse("torchdynamo955_2022_standalone_graph_break.log")
    assert s.errors == []
    (gb,) = s.rows["graph_breaks"]
    assert gb["reason"] == "numpy"
    assert (gb["user_file"], gb["user_line"], gb["user_function"]) == ("benchmarks/torchbench.py", 351,
                                                                         "forward_and_backward_pass")
