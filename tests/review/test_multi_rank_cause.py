"""Which ranks carry a regression, on fresh real 2-rank gloo jobs made here on the CPU through
`compilewatch collect` around `torchrun --standalone --nproc_per_node=2`
(tests/fixtures/ranks/ddp_train.py; its README says what --diverge does): v1 twice, every rank
compiling the same frames, and v2-diverge twice, where rank 1 alone recompiles on shorter batches
and breaks its graph on a print. The weekly review's verdicts must name rank 1 and only rank 1, with
the same per-rank figures `compilewatch ranks --json` gives for the same runs; `check` says it too.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.baseline import parse_spec
from compilewatch.review.weekly import review
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "tests" / "fixtures" / "ranks" / "ddp_train.py"
BASE, CAND = "label=v1,model=ddp_mlp", "label=v2-diverge,model=ddp_mlp"
# `compilewatch ranks --json`'s per-rank column for each figure a rank part counts
CLI_COLUMN = {"recompiles": "recompiles", "graph_breaks": "graph_breaks", "compile_s": "compile_time_s",
              "compiles": "compiles"}


def _torchrun() -> list[str]:
    beside = Path(sys.executable).with_name("torchrun")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "torch.distributed.run"]


def _collect(out: Path, version: str, cache: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}
    extra = ["--diverge"] if version == "v2-diverge" else []
    # each run compiles cold in a cache folder of its own: one cache state on both sides
    p = subprocess.run([sys.executable, "-m", "compilewatch", "collect", "--archive", "--no-probe",
                        "--model", "ddp_mlp", "--label", version, "--out", str(out), "--",
                        *_torchrun(), "--standalone", "--nproc_per_node=2", str(JOB), *extra],
                       env=env, cwd=out, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.fixture(scope="module")
def ddp_db(tmp_path_factory) -> Path:
    if shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists():
        pytest.importorskip("torch.distributed.run")
    work = tmp_path_factory.mktemp("multi-rank")
    out = work / "bundles"
    out.mkdir()
    # two runs a side, the fewest that make two flagged runs in a row; alternated, as a careful team runs them
    for n, version in enumerate(("v1", "v2-diverge", "v1", "v2-diverge")):
        _collect(out, version, work / f"cache-{n}")
    db = work / "cw.duckdb"
    rep = ingest_paths(open_store(db), sorted(out.glob("*.tar.gz")))
    assert rep.ok, [(f.name, f.message) for f in rep.files if f.status == "failed"]
    return db


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compilewatch", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=300)


def _ranks(db: Path, run_id: str) -> dict:
    p = _cli(db, "ranks", run_id, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_verdict_names_the_rank_that_diverged_as_compilewatch_ranks_does(ddp_db):
    with open_store(ddp_db).read() as con:
        r = review(con, parse_spec(BASE), parse_spec(CAND))
        runs = dict(con.execute("SELECT run_id, label FROM runs").fetchall())
    assert sorted(runs.values()) == ["v1", "v1", "v2-diverge", "v2-diverge"]
    worse = [v for v in r.verdicts if v.worse]
    assert any(v.status == "regression" for v in worse), [(v.metric, v.kind, v.status) for v in r.verdicts]
    ranked = [v for v in worse if v.cause and any(p.kind == "ranks" for p in v.cause.parts)]
    # the recompiles rank 1 alone made are a regression whose cause names rank 1
    assert any(v.kind == "new_recompiling_function" or v.metric == "recompiles" for v in ranked), \
        [(v.metric, v.kind, v.cause.text if v.cause else None) for v in worse]

    # what `compilewatch ranks` says of each run: v1's ranks agree; in v2-diverge rank 1 differs from rank 0
    cli = {rid: _ranks(ddp_db, rid) for rid in runs}
    for rid, label in runs.items():
        flagged = {d["ranks"] for d in cli[rid]["divergence"]}
        assert flagged == (set() if label == "v1" else {"1"}), (label, cli[rid]["divergence"])

    def per_rank(run_ids, figure):
        rows = [x for rid in run_ids for x in cli[rid]["ranks"]]
        by: dict[int, list[float]] = {}
        for x in rows:
            by.setdefault(int(x["rank"]), []).append(float(x.get(CLI_COLUMN[figure]) or 0))
        return {k: sorted(v) for k, v in by.items()}

    for v in ranked:
        part = next(p for p in v.cause.parts if p.kind == "ranks")
        # the ranks the cause names are those `compilewatch ranks` flags in every candidate run
        assert part.fields["ranks"] == [1], part.text
        assert "rank 1 alone" in part.text and "rank 1 alone" in v.cause.text, v.cause.text
        # and its figures per rank are the CLI's: the median over each side's runs
        figure = part.fields["figure"]
        for side, ids in (("baseline", v.baseline.run_ids), ("candidate", v.candidate.run_ids)):
            seen = per_rank(ids, figure)
            for rank, values in part.fields["per_rank"].items():
                vals = seen.get(int(rank), [0.0] * len(ids))
                median = (vals[(len(vals) - 1) // 2] + vals[len(vals) // 2]) / 2
                assert values[side] == pytest.approx(median, rel=1e-6, abs=1e-6), (figure, side, rank, vals)
        assert part.fields["per_rank"]["1"]["candidate"] > part.fields["per_rank"]["1"]["baseline"]

    # every verdict that got worse says rank 1 carries it, and no part names another rank
    for v in worse:
        assert v.cause is not None, v.summary
        named = [p.fields["ranks"] for p in v.cause.parts if "ranks" in p.fields]
        assert named and all(x == [1] for x in named), (v.metric, v.kind, v.cause.text)

    # the graphs that changed are rank 1's, as `compilewatch diff --rank` shows on the runs the cause read
    graphs = next(p for v in worse for p in v.cause.parts if p.kind == "graphs").fields
    frame = (graphs["co_name"], graphs["co_file"], graphs["co_firstlineno"])
    assert graphs["diff_rank"] == 1 and "on rank 1:" in next(p for v in worse for p in v.cause.parts
                                                              if p.kind == "graphs").text

    def frame_diff(rank):
        p = _cli(ddp_db, "diff", graphs["baseline_run"], graphs["candidate_run"], "--rank", str(rank), "--json")
        assert p.returncode == 0, p.stderr
        return [x for x in json.loads(p.stdout)["pairs"]
                if (x["frame"]["function"], x["frame"]["file"], x["frame"]["line"]) == frame]
    on_1, on_0 = frame_diff(1), frame_diff(0)
    assert on_1 and any(x["changed"] for x in on_1) and on_0 and not any(x["changed"] for x in on_0)
    kernels, ops = Counter(), Counter()
    for x in on_1:
        kernels.update(x["kernels_added"])
        ops.update({k.rsplit(".", 1)[-1]: n for k, n in x["ops_added"].items()})
    assert graphs["kernels_added"] == dict(kernels) and graphs["ops_added"] == dict(ops)

    # `check` on the same store says it in its text and in --json
    p = _cli(ddp_db, "check", "--baseline", BASE, "--candidate", CAND, "--json")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    items = json.loads(p.stdout)["regressions"]
    parts = [x for i in items if i["cause"] for x in i["cause"]["parts"] if x["kind"] == "ranks"]
    assert parts and all(x["fields"]["ranks"] == [1] for x in parts), items
    p = _cli(ddp_db, "check", "--baseline", BASE, "--candidate", CAND)
    assert p.returncode == 1 and "cause: " in p.stdout and "rank 1 alone" in p.stdout, p.stdout[-3000:]
