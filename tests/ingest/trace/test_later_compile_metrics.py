"""A run's compile time counts what the job waited for: each compile id's forward compile, its
backward compile (bwd_compilation_metrics) and its runtime autotuning (compilation_metrics_runtime,
bwd_compilation_metrics_runtime), on real GPU training bundles (sample_logs/, torch 2.11 on an H100
and on two H200s). The expected figures are read here from the bundles' trace files with json, not
through the parsers or the store's SQL."""
from __future__ import annotations

import json
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[3]
H100 = REPO / "sample_logs" / "gpu-h100-torch2.11" / "llama-pretrain_v1-clean_run1.tar.gz"
H100_BREAKS = REPO / "sample_logs" / "gpu-h100-torch2.11" / "llama-pretrain_v2-breaks_run1.tar.gz"
DDP = REPO / "sample_logs" / "gpu-h200x2-nccl-torch2.11" / "ddp-mlp_v2-rank1-diverges_run1.tar.gz"
CUDAGRAPHS = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs" / "tiny-lm-ro_clean_run1.tar.gz"
BUNDLES = (H100, H100_BREAKS, DDP, CUDAGRAPHS)


def _records(bundle: Path):
    """(rank, event, value) of every metrics record in the bundle's traces, read with json."""
    with tarfile.open(bundle) as tar:
        for m in tar.getmembers():
            if "/trace/" not in m.name or not m.isfile():
                continue
            rank = int(m.name.split("rank_")[1].split("_")[0]) if "rank_" in m.name else None
            for line in tar.extractfile(m).read().decode().splitlines():
                i = line.find('] {"')
                if i < 0 or "metrics" not in line[:i + 60]:
                    continue
                record = json.loads(line[i + 2:])
                event = next(iter(record))
                if event.endswith(("compilation_metrics", "compilation_metrics_runtime")):
                    yield rank, event, record[event]


def _expected(bundle: Path) -> dict:
    """Per rank: forward, backward and runtime-autotune seconds, and the compile ids with a backward."""
    out = defaultdict(lambda: {"forward": 0.0, "backward": 0.0, "runtime_autotune": 0.0, "cudagraphify": 0.0,
                               "bwd_ids": set()})
    for rank, event, m in _records(bundle):
        r = out[rank]
        if event == "compilation_metrics":
            r["forward"] += m["entire_frame_compile_time_s"] or 0
        elif event == "bwd_compilation_metrics":
            r["backward"] += m["backward_cumulative_compile_time_us"] / 1e6
            r["bwd_ids"].add(m["compile_id"])
        else:
            r["runtime_autotune"] += (m.get("runtime_triton_autotune_time_us") or 0) / 1e6
            r["cudagraphify"] += (m.get("runtime_cudagraphify_time_us") or 0) / 1e6
    return out


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("later") / "cw.duckdb")
    assert ingest_paths(store, list(BUNDLES)).ok
    with store.read() as c:
        yield c


def _run_id(con, bundle: Path) -> str:
    model, label = bundle.name.split("_")[:2]
    (run_id,) = [r for (r,) in con.execute("SELECT run_id FROM runs WHERE model = ? AND label = ?",
                                           [model, label]).fetchall()]
    return run_id


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda b: b.stem)
def test_compile_time_is_forward_plus_backward_plus_runtime_autotuning(con, bundle):
    want = _expected(bundle)
    run_id = _run_id(con, bundle)
    per_rank = {rank: r["forward"] + r["backward"] + r["runtime_autotune"] for rank, r in want.items()}
    assert all(r["backward"] > 0 for r in want.values())       # training jobs: every rank compiled a backward
    (got,) = con.execute("SELECT value FROM run_metrics WHERE run_id = ? AND metric = 'compile_time'",
                         [run_id]).fetchall()[0]
    assert got == pytest.approx(max(per_rank.values()), abs=1e-5)   # the slowest rank
    assert got > max(r["forward"] for r in want.values())            # more than the forward alone
    # every place that shows compile time uses the same sum: the run totals (Overview, Compare, Trends)
    # and the frames' rollup (Compile time page, `compilewatch compile-time`) add up the ranks
    total = sum(per_rank.values())
    assert con.execute("SELECT compile_s FROM rollup_run_totals WHERE run_id = ?", [run_id]).fetchall()[0][0] \
        == pytest.approx(total, abs=1e-5)
    forward, backward, autotune, total_s = con.execute(
        "SELECT sum(forward_s), sum(backward_s), sum(runtime_autotune_s), sum(total_s) FROM rollup_compile_time "
        "WHERE run_id = ?", [run_id]).fetchall()[0]
    assert forward == pytest.approx(sum(r["forward"] for r in want.values()), abs=1e-5)   # kept beside the split
    assert backward == pytest.approx(sum(r["backward"] for r in want.values()), abs=1e-5)
    assert autotune == pytest.approx(sum(r["runtime_autotune"] for r in want.values()), abs=1e-5)
    assert total_s == pytest.approx(total, abs=1e-5)
    # the backward's compile ids are stored per rank
    for rank, r in want.items():
        ids = {c for (c,) in con.execute("SELECT compile_id FROM later_compile_metrics WHERE run_id = ? "
                                         "AND rank IS NOT DISTINCT FROM ? AND event = 'bwd_compilation_metrics'",
                                         [run_id, rank]).fetchall()}
        assert ids == r["bwd_ids"]


def test_a_restarted_compile_gets_its_backward(con):
    """A compile that restarted after a graph break logs compilation_metrics as attempt 1 ("0/0_1")
    and its runtime records under "0/0": they join by frame compile, not by the printed id."""
    run_id = _run_id(con, H100_BREAKS)
    restarted = con.execute("""
        SELECT c.compile_id, sum(l.backward_compile_time_s), sum(l.runtime_autotune_time_s)
        FROM compiles c JOIN later_compile_metrics l USING (run_id, file_id, frame_id, frame_compile_id)
        WHERE c.run_id = ? AND c.attempt > 0 GROUP BY ALL""", [run_id]).fetchall()
    assert restarted and all(b or a for _, b, a in restarted), restarted
    # no later record is left without its compile: the frames' time holds them all
    frames = con.execute("SELECT sum(backward_s) + sum(runtime_autotune_s) FROM rollup_compile_time "
                         "WHERE run_id = ? AND co_name IS NOT NULL", [run_id]).fetchall()[0][0]
    later = con.execute("SELECT sum(coalesce(backward_compile_time_s, 0) + coalesce(runtime_autotune_time_s, 0)) "
                        "FROM later_compile_metrics WHERE run_id = ?", [run_id]).fetchall()[0][0]
    assert frames == pytest.approx(later, abs=1e-6) and later > 0


def test_cuda_graph_recording_is_kept_apart(con):
    """Runtime records of a mode="reduce-overhead" job also time CUDA-graph recording: stored per
    record, not counted as compile time (the parametrized test above checks the sum without it)."""
    want = _expected(CUDAGRAPHS)
    run_id = _run_id(con, CUDAGRAPHS)
    got = con.execute("SELECT sum(runtime_cudagraphify_time_s) FROM later_compile_metrics WHERE run_id = ?",
                      [run_id]).fetchall()[0][0]
    assert got == pytest.approx(sum(r["cudagraphify"] for r in want.values()), abs=1e-6) and got > 0
