"""`compilewatch summarize --json` on a handful of real logs, byte for byte: a bundle archive, a
folder of bundles, a multi-rank run, a trace, text logs of many torch versions, and a file that is
not a log. summarize is the ingest pipeline run dry (ingest/summary.py), so a change anywhere in
expand, kind, parse, refusal or judgement that moves a number shows here.

Regenerate after a deliberate change, then read the diff before committing:

    UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/ingest/test_summarize_golden.py

benchmarks/summarize_snapshot.py runs the same check over every real log.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from compilewatch.cli import main

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "fixtures" / "summarize"
INPUTS = {
    "sample_bundle": "sample_logs/cpu-torch2.14.1/item_branch_default_infer.tar.gz",
    # a bundle whose TORCH_LOGS text beside its trace still gives the CUDA-graph skips only it carries
    "cudagraph_skips_beside_trace": "sample_logs/gpu-h100-torch2.11-cudagraphs/tiny-lm-ro_changed_run1.tar.gz",
    "review_breaks_folder": "tests/fixtures/review/breaks",
    "ranks_diverge": "tests/fixtures/ranks/ddp_diverge.tar.gz",
    "trace_graph_break_recompile": "tests/fixtures/trace/graph_break_recompile.log.gz",
    # tlparse's vLLM and regional-compilation samples: pieces, post-grad passes, named subgraphs
    "trace_tlparse_subgraphs": "tests/fixtures/trace/tlparse",
    "text_folder": "tests/fixtures/text",
    "not_a_log": "tests/fixtures/text/README.md",
}


def summarize_json(path: Path) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["summarize", str(path), "--json"])
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_summarize_json_is_unchanged(name, monkeypatch):
    monkeypatch.chdir(REPO)   # names in the output are as given: relative, so the same on any checkout
    got = summarize_json(Path(INPUTS[name]))
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert golden.exists(), f"no golden for {name}: run with UPDATE_GOLDEN=1"
    want = json.loads(golden.read_text(encoding="utf-8"))
    assert got["status"] == want["status"]
    assert got["stderr"] == want["stderr"]
    assert got["stdout"] == want["stdout"]   # the JSON text itself: key order and layout included
