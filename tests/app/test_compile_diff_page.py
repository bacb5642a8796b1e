"""The Compare page's compile diff and Run detail's CUDA-graph tab on real runs made with
`compilewatch collect`: tiny-job v1 -> v2 (sample_logs/cpu-torch2.13-versions: one op and one guard
added) and a reduce-overhead H100 run whose CUDA graphs were skipped
(sample_logs/gpu-h100-torch2.11-cudagraphs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def versions_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("versions") / "cw.duckdb"
    paths = sorted((REPO / "sample_logs" / "cpu-torch2.13-versions").glob("tiny-job_*.tar.gz"))
    paths += sorted((REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs").glob("tiny-lm-ro_changed_run1.tar.gz"))
    assert ingest_paths(open_store(db), paths).ok
    return db


def _run(db, label):
    with open_store(db).read() as con:
        return con.execute("SELECT run_id FROM runs WHERE label = ? ORDER BY started_at LIMIT 1", [label]).fetchall()[0][0]


def test_compare_shows_the_added_op_guard_and_kernel_when_opened(app_at, versions_db):
    a, b = _run(versions_db, "v1"), _run(versions_db, "v2")
    at = app_at(versions_db, "views/compare.py", query={"run": a, "run_b": b})
    assert not at.exception
    assert not [d for d in at.dataframe if "guards" in d.value.columns]     # nothing read until opened
    at.toggle(key="cmp_diff_open").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    (diff,) = [d.value for d in at.dataframe if "guards" in d.value.columns]
    row = diff.iloc[0]
    assert row["ops"] == "+ .relu" and row["guards"] == "+ EQUALS_MATCH: L['self'].act_mode == 1"
    assert "+ cpp_fused_relu_N" in row["kernels"] and row["what"] == "changed"
    at.radio(key="cmp_diff_kind").set_value("dynamo_output_graph").run()
    code = [c.value for c in at.code if c.value.startswith("--- baseline 0/0 dynamo_output_graph")]
    assert code and "= h.relu()" in code[0]


def test_run_detail_lists_the_cudagraph_skip_with_its_fix(app_at, versions_db):
    at = app_at(versions_db, "views/run_detail.py", query={"run": _run(versions_db, "changed")})
    assert not at.exception
    (cg,) = [d.value for d in at.dataframe if "user_code" in d.value.columns]
    skip = cg[cg["event"] == "skip"].iloc[0]
    assert skip["category"] == "mutated_input" and skip["location"].endswith("gpu_train.py:88")
    assert "in place" in skip["hint"]
    assert any("compiled **cold" in c.value for c in at.caption)
