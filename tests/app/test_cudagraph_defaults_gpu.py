"""A reduce-overhead GPU job collected with no --logs flag shows its skip reason and its CUDA-graph
coverage in Run detail and in `check`.

The bundles are made on a GPU by sample_logs/scripts/cudagraphs/run_gpu_defaults.sh (coverage_job.py,
versions one-graph / cpu-op / skip, two runs each, the collector's default TORCH_LOGS) and kept in
sample_logs/gpu-<gpu>-torch<version>-defaults/ (e.g. sample_logs/gpu-h100-torch2.11-defaults/
mlp-coverage_skip_run1.tar.gz). Every test here skips while no such folder exists. Each figure is
read again from the bundle's own files: the manifest's TORCH_LOGS, the text log's skip lines,
timings.json's counters and the hooks' replay count."""
from __future__ import annotations

import contextlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from compilewatch.cli import main
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review import cudagraph_coverage as cov
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted(p for d in sorted((REPO / "sample_logs").glob("gpu-*-defaults")) for p in d.glob("mlp-coverage_*.tar.gz"))
JOB = REPO / "sample_logs" / "scripts" / "cudagraphs" / "coverage_job.py"
pytestmark = pytest.mark.skipif(not BUNDLES, reason="no sample_logs/gpu-*-defaults/ bundles yet "
                                                    "(sample_logs/scripts/cudagraphs/run_gpu_defaults.sh makes them)")


def _version(p: Path) -> str:
    return p.name.split("_")[1]


def _files(archive: Path) -> dict:
    with tarfile.open(archive) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _of(version: str) -> list[Path]:
    return [p for p in BUNDLES if _version(p) == version]


# the line of the in-place update torch names as the skip's user code
EMA_LINE = next(i for i, ln in enumerate(JOB.read_text().splitlines(), 1) if "ema.mul_(0.99)" in ln)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("defaults-gpu") / "cw.duckdb"
    assert ingest_paths(open_store(path), BUNDLES).ok
    return path


@pytest.mark.parametrize("archive", BUNDLES, ids=lambda p: p.name.split(".")[0])
def test_collected_with_the_default_logs_and_its_coverage_stored(db, archive):
    files = _files(archive)
    manifest, timings = json.loads(files["manifest.json"]), json.loads(files["timings.json"])
    assert "cudagraphs" in manifest["torch_logs_setting"].split(",") and manifest["exit_status"] == 0
    inductor = timings["dynamo_counters"].get("inductor", {})
    compiled = [c for c in timings["callables"] if c["mode"] == "compiled"]
    want_share = sum(c["replayed_calls"] for c in compiled) / sum(c["calls"] for c in compiled)
    log = files["torch_logs.txt"].decode()
    trace = b"".join(v for k, v in files.items() if k.startswith("trace/")).decode()
    # a recording is one begin and one end event of dynamo_timed("CUDAGraphNode.record")
    recorded = trace.count('"name": "CUDAGraphNode.record"') // 2
    with open_store(db).read() as con:
        c = cov.run_coverages(con, [manifest["run_id"]])[manifest["run_id"]]
    assert c.graphs == recorded > 0
    assert 0 < timings["cudagraphs"]["recordings"] <= recorded      # the hooks watch from the first compile on
    assert c.partitions == inductor.get("cudagraph_partitions", 0)
    assert c.skips == log.count("skipping cudagraphs due to ")
    assert c.replay_share == pytest.approx(want_share)
    if _version(archive) == "one-graph":
        assert (c.partitions, c.skips) == (0, 0) and c.replay_share > 0.9
    else:
        assert c.partitions >= 2                      # the .cpu() split the forward
    if _version(archive) == "skip":
        assert c.skips >= 1


@pytest.mark.skipif(not _of("skip"), reason="no skip bundle")
def test_check_prints_the_skip_reason_and_the_coverage():
    archive = _of("skip")[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", str(archive)]) == 0
    printed = out.getvalue()
    assert "CUDA graphs: " in printed and " partitions plus " in printed and "% of compiled calls replayed" in printed
    assert "skipped due to mutated inputs at " in printed and f"coverage_job.py:{EMA_LINE} " in printed


@pytest.mark.skipif(not (_of("skip") and _of("one-graph")), reason="needs the one-graph and skip bundles")
def test_check_against_the_one_graph_runs_says_the_coverage_fell(tmp_path):
    db = tmp_path / "cw.duckdb"
    assert ingest_paths(open_store(db), _of("one-graph")).ok
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", "--db", str(db), "--baseline", "label=one-graph", "--json", *map(str, _of("skip"))])
    (c,) = json.loads(out.getvalue())["cudagraph_coverage"]
    assert c["direction"] == "fell" and c["change"].startswith("CUDA-graph coverage fell from ")
    assert " partitions plus " in c["candidate"]


@pytest.mark.skipif(not _of("skip"), reason="no skip bundle")
def test_run_detail_shows_the_skip_reason_and_the_coverage(app_at, db):
    run_id = json.loads(_files(_of("skip")[0])["manifest.json"])["run_id"]
    at = app_at(db, "views/run_detail.py", query={"run": run_id})
    assert not at.exception, [e.value for e in at.exception]
    (row,) = [d.value for d in at.dataframe if "cudagraph_partitions" in d.value.columns]
    assert row["cudagraph_skips"].iloc[0] >= 1 and row["replayed_pct"].iloc[0] > 0
    assert any(c.value.startswith("CUDA-graph coverage: **") and "plus" in c.value for c in at.caption)
    (events,) = [d.value for d in at.dataframe if "user_code" in d.value.columns]
    skip = events[events["event"] == "skip"].iloc[0]
    assert skip["reason"] == "mutated inputs" and skip["location"].endswith(f"coverage_job.py:{EMA_LINE}")
