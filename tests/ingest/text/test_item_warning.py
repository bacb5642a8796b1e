"""torch 2.5+ warn "Graph break from `Tensor.item()`, consider setting: ... Graph break: from user
code at:" just before the [__graph_breaks] record of the same break: one break, not two."""
from pathlib import Path

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "text" / "torch2.11_h200_item_warning_then_break.log"


def test_item_warning_is_not_a_second_break():
    sink = CollectingSink()
    with open(LOG, "rb") as f:
        parse_text(f, sink)
    breaks = sink.rows["graph_breaks"]
    assert [b["gb_type"] for b in breaks] == ["Unsupported Tensor.item() call with capture_scalar_outputs=False"]
    assert breaks[0]["user_line"] == 198 and breaks[0]["compile_id"] == "0/0"
    assert [r["function"] for r in sink.rows["recompiles"]] == ["torch_dynamo_resume_in_forward_at_198"]
    assert sink.errors == []
