"""CUDA-graph coverage per run from real reduce-overhead runs on an H100
(sample_logs/gpu-h100-torch2.11-cudagraphs, made by sample_logs/scripts/cudagraphs/run_gpu.sh) and
a reduce-overhead run on the CPU (sample_logs/cpu-torch2.13-versions). Every figure the store,
`summarize` and `check` give is computed here again from the bundle's own files: the trace's
CUDAGraphNode.record spans, timings.json's inductor counters, and the skip and re-recording lines
of torch_logs.txt."""
from __future__ import annotations

import contextlib
import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from compilewatch.cli import main
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.summary import summarize
from compilewatch.review import cudagraph_coverage as cov
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs"
CPU_RO = REPO / "sample_logs" / "cpu-torch2.13-versions" / "mlp-reduce-overhead_cpu-reduce-overhead_run1.tar.gz"


def bundle_figures(archive: Path) -> dict:
    """The coverage as the bundle's own files say it, read without compilewatch."""
    with tarfile.open(archive) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    trace = b"".join(v for k, v in files.items() if k.startswith("trace/")).decode()
    # each recording is one begin ("B") and one end ("E") event of dynamo_timed("CUDAGraphNode.record")
    events = re.findall(r'"name": "CUDAGraphNode\.record".*?"ph": "([BE])"', trace, re.S)
    assert events.count("B") == events.count("E")
    recorded = events.count("B")
    inductor = json.loads(files["timings.json"])["dynamo_counters"].get("inductor", {})
    log = files["torch_logs.txt"].decode()
    return {"run_id": json.loads(files["manifest.json"])["run_id"], "label": json.loads(files["manifest.json"])["label"],
            "graphs": recorded, "partitions": inductor.get("cudagraph_partitions", 0),
            "skips": log.count("skipping cudagraphs due to "),
            "counted_skips": inductor.get("cudagraph_skips", 0),
            "rerecords": log.count("CUDAGraph supports dynamic shapes by recording a new graph")}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("coverage") / "cw.duckdb"
    s = open_store(db)
    assert ingest_paths(s, sorted(GPU.glob("*.tar.gz")) + [CPU_RO]).ok
    return s


@pytest.mark.parametrize("archive", sorted(GPU.glob("*.tar.gz")), ids=lambda p: p.name.split(".")[0])
def test_coverage_metrics_are_the_bundles_own_figures(store, archive):
    want = bundle_figures(archive)
    with store.read() as con:
        got = dict(con.execute("SELECT metric, value FROM run_metrics WHERE run_id = ? AND metric LIKE 'cudagraph%'",
                               [want["run_id"]]).fetchall())
        per_run = cov.run_coverages(con, [want["run_id"]])[want["run_id"]]
    assert want["graphs"] > 0
    assert got["cudagraph_graphs"] == want["graphs"]
    assert got["cudagraph_partitions"] == want["partitions"]
    assert got["cudagraph_skips"] == want["skips"]
    assert got["cudagraph_rerecords"] == want["rerecords"]
    # these hooks predate the replay count: no share rather than a share of 0
    assert "cudagraph_replay_share" not in got and per_run.replay_share is None
    assert (per_run.graphs, per_run.partitions, per_run.skips) == (want["graphs"], want["partitions"], want["skips"])


def test_the_changed_job_split_its_graphs_and_skipped_one(store):
    """What the review and Run detail say of these runs, figure by figure (22 recordings: one per
    sequence length; 4 partitions: the .cpu() in the accuracy helper, per compile; 11 skips)."""
    changed = bundle_figures(GPU / "tiny-lm-ro_changed_run1.tar.gz")
    clean = bundle_figures(GPU / "tiny-lm-ro_clean_run1.tar.gz")
    assert (clean["graphs"], clean["partitions"], clean["skips"]) == (3, 0, 0)
    assert (changed["graphs"], changed["partitions"], changed["skips"], changed["rerecords"]) == (22, 4, 11, 3)
    with store.read() as con:
        ids = dict(con.execute("SELECT label, list(run_id) FROM runs GROUP BY label").fetchall())
        text = cov.side_change(con, ids["clean"], ids["changed"])
        back = cov.side_change(con, ids["changed"], ids["clean"])
        same = cov.side_change(con, ids["clean"], ids["clean-warm-cache"])
    assert text == ("CUDA-graph coverage fell from 3 graphs to 22 graphs in 4 partitions plus 11 skips, "
                    "re-recorded per input size (3 warnings)")
    assert back.startswith("CUDA-graph coverage rose from 22 graphs")
    assert same is None


def test_partitions_are_a_gated_count_and_the_rest_shown(store):
    from compilewatch.review.baseline import parse_spec
    from compilewatch.review.gate import assemble
    with store.read() as con:
        r = assemble(con, parse_spec("label=clean"), parse_spec("label=changed"))
    (v,) = [v for v in r.regressions if v.metric == "cudagraph_partitions"]
    assert (v.baseline.median, v.candidate.median) == (0, 4)
    assert not [v for v in r.verdicts if v.metric in ("cudagraph_graphs", "cudagraph_replay_share")
                and v.status == "regression"]


def test_summarize_and_check_give_the_same_coverage(store):
    archive = GPU / "tiny-lm-ro_changed_run1.tar.gz"
    want = bundle_figures(archive)
    s = summarize([archive])["cudagraphs"]
    assert (s["graphs"], s["partitions"], s["skips"], s["rerecords"], s["skips_counted_by_torch"]) == \
        (want["graphs"], want["partitions"], want["skips"], want["rerecords"], want["counted_skips"])
    assert s["skip_reasons"] == [{"reason": "mutated inputs", "where": "/tmp/scratch-job/gpu_train.py:88", "count": 11}]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["check", str(archive), "--max-graph-breaks", "0"]) == 0
    printed = out.getvalue()
    assert "CUDA graphs: 22 graphs in 4 partitions plus 11 skips" in printed
    assert "skipped due to mutated inputs at /tmp/scratch-job/gpu_train.py:88 (x11)" in printed


def test_check_against_a_baseline_words_the_coverage_change(store, tmp_path):
    db = tmp_path / "cw.duckdb"
    assert ingest_paths(open_store(db), sorted(GPU.glob("tiny-lm-ro_clean_run*.tar.gz"))).ok
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["check", "--db", str(db), "--baseline", "label=clean", "--json",
                       str(GPU / "tiny-lm-ro_changed_run1.tar.gz")])
    got = json.loads(out.getvalue())
    assert status == 1
    (c,) = got["cudagraph_coverage"]
    assert c["direction"] == "fell" and c["baseline"] == "3 graphs"
    assert c["change"].startswith("CUDA-graph coverage fell from 3 graphs to 22 graphs in 4 partitions plus 11 skips")


def test_a_cpu_run_has_zero_coverage_and_no_error(store):
    """reduce-overhead on the CPU: torch counts a skip and logs none, records nothing."""
    want = bundle_figures(CPU_RO)
    assert want["counted_skips"] >= 1 and want["graphs"] == 0 and want["skips"] == 0
    with store.read() as con:
        (rid,) = con.execute("SELECT run_id FROM runs WHERE label = 'cpu-reduce-overhead'").fetchone()
        c = cov.run_coverages(con, [rid])[rid]
        # a CPU run that never asked for CUDA graphs has no coverage at all
        others = con.execute("SELECT count(*) FROM run_metrics WHERE metric = 'cudagraph_graphs' "
                             "AND run_id NOT IN (SELECT run_id FROM runs WHERE model = 'tiny-lm-ro') AND run_id <> ?",
                             [rid]).fetchone()[0]
    assert (c.graphs, c.partitions, c.skips, c.replay_share) == (0, 0, 0, None)
    assert cov.describe(c) == "no CUDA graph" and others == 0


@pytest.mark.parametrize("base, cand, words", [
    (cov.Coverage(graphs=1), cov.Coverage(partitions=2, skips=1),
     "CUDA-graph coverage fell from 1 graph to 2 partitions plus a skip"),
    (cov.Coverage(partitions=2, skips=1), cov.Coverage(graphs=1),
     "CUDA-graph coverage rose from 2 partitions plus a skip to 1 graph"),
    (cov.Coverage(graphs=2, replay_share=0.98), cov.Coverage(graphs=2, replay_share=0.40),
     "CUDA-graph coverage fell from 2 graphs, 98% of compiled calls replayed to 2 graphs, 40% of compiled calls replayed"),
    (cov.Coverage(graphs=2, replay_share=0.98), cov.Coverage(graphs=2, replay_share=0.97), None),
    # a skip gone and a split new: neither fell nor rose
    (cov.Coverage(graphs=3, skips=1), cov.Coverage(graphs=1, partitions=2),
     "CUDA-graph coverage changed from 3 graphs plus a skip to 1 graph in 2 partitions"),
])
def test_the_change_in_words(base, cand, words):
    assert cov.change_text(base, cand) == words
