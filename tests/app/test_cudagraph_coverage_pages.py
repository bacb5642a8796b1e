"""Run detail's CUDA-graph tab and the Trends page show each run's CUDA-graph coverage, on real
reduce-overhead runs (sample_logs/gpu-h100-torch2.11-cudagraphs, H100, run 1 of each version) and a
run that never used CUDA graphs (sample_logs/cpu-torch2.13-versions, tiny-job v1). The figures
themselves are checked against the bundles' own files in tests/ingest/test_cudagraph_coverage.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cgcov") / "cw.duckdb"
    paths = sorted(GPU.glob("tiny-lm-ro_c*_run1.tar.gz"))
    paths += [REPO / "sample_logs" / "cpu-torch2.13-versions" / "tiny-job_v1_run1.tar.gz"]
    assert ingest_paths(open_store(path), paths).ok
    return path


def _run(db, label):
    with open_store(db).read() as con:
        return con.execute("SELECT run_id FROM runs WHERE label = ? LIMIT 1", [label]).fetchone()[0]


def test_run_detail_shows_the_coverage_beside_the_skip_reason(app_at, db):
    at = app_at(db, "views/run_detail.py", query={"run": _run(db, "changed")})
    assert not at.exception, [e.value for e in at.exception]
    (row,) = [d.value for d in at.dataframe if "cudagraph_partitions" in d.value.columns]
    assert (row["cudagraph_graphs"].iloc[0], row["cudagraph_partitions"].iloc[0], row["cudagraph_skips"].iloc[0]) == (22, 4, 11)
    assert any(c.value.startswith("CUDA-graph coverage: **22 graphs in 4 partitions plus 11 skips") for c in at.caption)
    (events,) = [d.value for d in at.dataframe if "user_code" in d.value.columns]
    assert events[events["event"] == "skip"].iloc[0]["reason"] == "mutated inputs"


def test_run_detail_of_a_run_without_cuda_graphs_says_so(app_at, db):
    at = app_at(db, "views/run_detail.py", query={"run": _run(db, "v1")})
    assert not at.exception, [e.value for e in at.exception]
    assert not [d for d in at.dataframe if "cudagraph_partitions" in d.value.columns]
    assert any("recorded, skipped and split no CUDA graph" in c.value for c in at.caption)


def test_trends_lists_each_runs_coverage(app_at, db):
    at = app_at(db, "views/trends.py")
    assert not at.exception, [e.value for e in at.exception]
    (table,) = [d.value for d in at.dataframe if "coverage" in d.value.columns]
    got = dict(zip(table["label"], table["coverage"]))
    assert got == {"clean": "3 graphs", "changed": "22 graphs in 4 partitions plus 11 skips, re-recorded per input size (3 warnings)",
                   "clean-warm-cache": "3 graphs",
                   "changed-fwd-mutation": "10 graphs in 2 partitions plus 11 skips, re-recorded per input size (2 warnings)"}
    assert "CUDA-graph coverage" in [s.value for s in at.subheader]
