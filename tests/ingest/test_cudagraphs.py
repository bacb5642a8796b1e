"""CUDA-graph skips and re-recordings from real reduce-overhead runs on an H100
(sample_logs/gpu-h100-torch2.11-cudagraphs, made by sample_logs/scripts/cudagraphs/run_gpu.sh).
`changed` mutates a plain CUDA tensor in a compiled helper (`ema.mul_(...)` at gpu_train.py:88)
and cycles through 10 sequence lengths; `clean` does neither. The skips come from the job's text
log (the trace has none), beside the trace that stays the source of every other event."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.ingest.formats.cudagraphs import categorise, skip_reason
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.baseline import parse_spec
from compilewatch.review.gate import assemble
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs"


@pytest.fixture(scope="module")
def cg_store(tmp_path_factory):
    db = tmp_path_factory.mktemp("cudagraphs") / "cw.duckdb"
    store = open_store(db)
    assert ingest_paths(store, sorted(GPU.glob("*.tar.gz"))).ok
    return store


def test_skips_with_their_reason_and_user_code(cg_store):
    with cg_store.read() as con:
        per_label = dict(con.execute(
            "SELECT r.label, count(*) FILTER (e.event = 'skip') FROM runs r LEFT JOIN cudagraph_events e USING (run_id) "
            "GROUP BY ALL").fetchall())
        skip = con.execute(
            "SELECT category, reason, user_file, user_line, user_function, user_code, count FROM cudagraph_events "
            "JOIN runs USING (run_id) WHERE label = 'changed' AND event = 'skip' LIMIT 1").fetchall()[0]
        sizes = con.execute("SELECT max(count) FROM cudagraph_events JOIN runs USING (run_id) "
                            "WHERE label = 'changed' AND event = 're_record'").fetchall()[0][0]
        # the trace is still the only source of recompiles: the text log adds no second copy
        recompiles = con.execute("SELECT count(*) FROM recompiles JOIN runs USING (run_id) WHERE label = 'changed'").fetchall()[0][0]
    assert per_label["clean"] == 0 and per_label["clean-warm-cache"] == 0
    assert per_label["changed"] == 22                      # 11 per run: once per input size
    assert skip[:5] == ("mutated_input", "mutated inputs", "/tmp/scratch-job/gpu_train.py", 88, "track_logit_mean")
    assert skip[5].startswith("ema.mul_(0.99)") and skip[6] == 1
    assert sizes == 9                                       # "We have observed 9 distinct sizes"
    assert recompiles == 6


def test_a_new_skip_reason_is_a_regression_with_its_fix(cg_store):
    with cg_store.read() as con:
        r = assemble(con, parse_spec("label=clean"), parse_spec("label=changed"))
    (v,) = [v for v in r.regressions if v.kind == "new_cudagraph_skip"]
    ev = v.evidence[0]
    assert ev.kind == "cudagraph_skip" and "mutated inputs at gpu_train.py:88" in ev.text
    assert "in place" in ev.fields["hint"]
    assert any(x.metric == "cudagraph_skips" and x.status == "regression" for x in r.regressions)


@pytest.mark.parametrize("reason, category", [
    ("mutated inputs (1 instances). Found from :", "mutated_input"),
    ("cpu device (primals_1)", "cpu_device"),
    ("non-cuda device in graph", "cpu_device"),
    ("dynamic shape input", "dynamic_shape"),
    ("incompatible ops", "incompatible_op"),
    ("something torch will say one day", "other")])
def test_reasons_as_torch_words_them_fall_in_categories(reason, category):
    # the first is the real H100 line above; the others are torch 2.x's wordings in
    # torch/_inductor/cudagraph_utils.py (check_for_mutation, get_device_node, ...)
    assert categorise(skip_reason("skipping cudagraphs due to " + reason)[0]) == category


def test_instances_are_read_from_the_warning():
    assert skip_reason("skipping cudagraphs due to mutated inputs (2 instances). Found from : ") == ("mutated inputs", 2)
