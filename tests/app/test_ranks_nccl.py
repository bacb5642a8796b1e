"""Multi-rank views, the divergence check and the review on real NCCL jobs: 2-GPU DDP and FSDP2 runs
of sample_logs/scripts/nccl/dist_train.py under `compilewatch collect -- torchrun` on 2 H200s
(sample_logs/gpu-h200x2-nccl-torch2.11, made by run_nccl.sh). Every expected value is read from the
bundles' own files here (the per-rank traces, the interleaved text log, the timings files), never
written down by hand."""
from __future__ import annotations

import json
import re
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import hotspots, ranks
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.rank_names import rank_from_name
from compilewatch.review.hints import wrapper_hint
from compilewatch.store import open_store

NCCL = Path(__file__).resolve().parents[2] / "sample_logs" / "gpu-h200x2-nccl-torch2.11"
BUNDLES = sorted(NCCL.glob("*.tar.gz"))
_TEXT_RANK = re.compile(r"^\[rank(\d+)\]:")
# a graph-break record's first line; torch 2.11 says "(user stack suppressed ...)" for a repeat
_TEXT_BREAK = re.compile(r"\[__graph_breaks\] Graph break(?: \([^)]*\))? in user code at (.*):\d+$")

pytestmark = pytest.mark.skipif(not BUNDLES, reason="sample_logs/ holds no NCCL bundles")


class Raw:
    """One bundle's files as the collector wrote them."""

    def __init__(self, path: Path):
        self.path = path
        self.traces: dict[int, list[str]] = {}
        self.timings: list[str] = []
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                if not m.isfile():
                    continue
                data = tar.extractfile(m).read().decode()
                if "/trace/" in m.name:
                    self.traces[rank_from_name(m.name)] = data.splitlines()
                elif m.name.endswith("manifest.json"):
                    self.manifest = json.loads(data)
                elif m.name.endswith("torch_logs.txt"):
                    self.text = data.splitlines()
                elif "/timings" in m.name:
                    self.timings.append(m.name.rsplit("/", 1)[1])

    def envelopes(self, rank: int, key: str):
        """(envelope, payload text or None) for each record of `key` in that rank's trace."""
        lines = self.traces[rank]
        for i, line in enumerate(lines):
            if f'"{key}"' not in line[:200] and f'"name": "{key}"' not in line:
                continue
            env = json.loads(line[line.index("{"):])
            payload = None
            if "has_payload" in env:
                body = []
                for nxt in lines[i + 1:]:
                    if not nxt.startswith("\t"):
                        break
                    body.append(nxt[1:])
                payload = "\n".join(body)
            yield env, payload

    def compile_ids(self, rank: int) -> set[str]:
        return {f"{e['frame_id']}/{e['frame_compile_id']}" for e, _ in self.envelopes(rank, "dynamo_start")}

    def artifact(self, rank: int, name: str) -> list:
        return [json.loads(p) for e, p in self.envelopes(rank, name)
                if e.get("artifact", {}).get("name") == name]

    def compile_seconds(self, rank: int) -> float:
        """What the rank waited for compiles: forward, backward and runtime autotuning."""
        forward = sum(e["compilation_metrics"].get("entire_frame_compile_time_s") or 0
                      for e, _ in self.envelopes(rank, "compilation_metrics") if "compilation_metrics" in e)
        backward = sum(e["bwd_compilation_metrics"]["backward_cumulative_compile_time_us"] / 1e6
                       for e, _ in self.envelopes(rank, "bwd_compilation_metrics") if "bwd_compilation_metrics" in e)
        autotune = sum((e[k].get("runtime_triton_autotune_time_us") or 0) / 1e6
                       for k in ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime")
                       for e, _ in self.envelopes(rank, k) if k in e)
        return forward + backward + autotune

    def text_breaks(self) -> Counter:
        """Graph-break records per rank in the interleaved TORCH_LOGS text: (rank, file) -> count."""
        out: Counter = Counter()
        for line in self.text:
            m = _TEXT_RANK.match(line)
            b = _TEXT_BREAK.search(line) if m else None
            if b:
                out[(int(m.group(1)), b.group(1).rsplit("site-packages/", 1)[-1])] += 1
        return out


RAW = {p.name.removesuffix(".tar.gz"): Raw(p) for p in BUNDLES}


@pytest.fixture(scope="module")
def nccl(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("nccl") / "cw.duckdb")
    report = ingest_paths(store, BUNDLES)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    run_of = {}
    with store.read() as con:
        for name, raw in RAW.items():
            run_of[name] = raw.manifest["run_id"]
            assert con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_of[name]]).fetchone()[0] == 1
    return store, run_of


def _named(prefix: str) -> list[str]:
    return sorted(n for n in RAW if n.startswith(prefix))


def test_every_bundle_holds_one_trace_and_one_timings_file_per_rank(nccl):
    store, run_of = nccl
    assert len(RAW) == 12
    for name, raw in RAW.items():
        assert raw.manifest["world_size"] == 2 and raw.manifest["gpu_name"] == "NVIDIA H200", name
        assert "--nproc_per_node=2" in raw.manifest["command"]
        assert sorted(raw.traces) == [0, 1], name
        assert sorted(raw.timings) == ["timings.json", "timings.rank1.json"], name
        with store.read() as con:
            per = ranks.per_rank(con, Filters(run_id=run_of[name]))
        assert list(per["rank"]) == [0, 1]
        assert [set(x) for x in per["compile_ids"]] == [raw.compile_ids(0), raw.compile_ids(1)], name


@pytest.mark.parametrize("name", _named("ddp-mlp_v1-clean") + _named("fsdp-mlp_v1-clean")
                         + _named("fsdp-mlp_v3-compiled-inside") + _named("fsdp-mlp_v4-blocks-compiled"))
def test_ranks_that_ran_the_same_steps_agree(nccl, name):
    store, run_of = nccl
    raw = RAW[name]
    assert raw.compile_ids(0) == raw.compile_ids(1)
    with store.read() as con:
        div = ranks.divergence(con, Filters(run_id=run_of[name]))
    assert div.empty, div.to_dict("records")


@pytest.mark.parametrize("name", _named("ddp-mlp_v2-rank1-diverges") + _named("fsdp-mlp_v2-rank1-diverges"))
def test_rank_1_diverges_and_the_check_says_how(nccl, name):
    store, run_of = nccl
    raw = RAW[name]
    f = Filters(run_id=run_of[name])
    with store.read() as con:
        div = ranks.divergence(con, f).set_index("aspect")
        recompiles = dict(con.execute("SELECT rank, count(*) FROM recompiles WHERE run_id = ? GROUP BY rank",
                                      [f.run_id]).fetchall())
    # compile ids: rank 1 has exactly the ids its trace has and rank 0's lacks
    extra = raw.compile_ids(1) - raw.compile_ids(0)
    assert extra and not raw.compile_ids(0) - raw.compile_ids(1)
    row = div.loc["compile ids"]
    assert row["ranks"] == "1" and row["reference_ranks"] == "0"
    assert set(row["difference"].removeprefix("has ").split(", ")) == extra
    # the shorter batch recompiles on rank 1 alone
    assert recompiles.get(0, 0) == 0 and recompiles[1] >= 1
    assert div.loc["recompiles"]["ranks"] == "1"
    # graph execution order: each rank's calls as logged; rank 1 calls more graphs in the DDP run,
    # where its print() splits the forward
    calls = {r: len(raw.artifact(r, "graph_execution")[0]["graph_execution_order"]) for r in (0, 1)}
    if name.startswith("ddp"):
        assert calls[1] > calls[0]
        assert div.loc["execution order"]["difference"].startswith(f"{calls[1]} call(s) vs {calls[0]}")
    else:
        assert calls[1] == calls[0]


def test_the_print_breaks_the_graph_on_rank_1_alone(nccl):
    store, run_of = nccl
    for name in _named("ddp-mlp_v2-rank1-diverges"):
        raw = RAW[name]
        in_script = {rank: n for (rank, where), n in raw.text_breaks().items() if where.endswith("dist_train.py")}
        assert set(in_script) == {1}, in_script
        with store.read() as con:
            stored = con.execute("SELECT rank, count(*) FROM graph_breaks WHERE run_id = ? AND "
                                 "user_file LIKE '%dist_train.py' GROUP BY rank", [run_of[name]]).fetchall()
        assert stored == [(1, in_script[1])]


def test_collective_schedule_of_the_compiled_all_reduce(nccl):
    """The job averages its loss over ranks with dist.all_reduce inside a compiled function;
    Inductor logs the schedule when it compiles that graph, so the first (cold cache) run has it."""
    store, run_of = nccl
    name = "ddp-mlp_v1-clean_run1"
    raw = RAW[name]
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id=run_of[name])).set_index("rank")
    for r in (0, 1):
        logged = raw.artifact(r, "inductor_collective_schedule")
        assert logged and any("all_reduce" in op for op in logged[0])
        ids = [f"{e['frame_id']}/{e['frame_compile_id']}" for e, _ in raw.envelopes(r, "inductor_collective_schedule")]
        want = [f"{ids[i]} {op}" for i, sched in enumerate(logged) for op in sched]
        assert list(per.loc[r, "collective_schedule"]) == want


def test_graph_calls_without_a_compile_id_are_not_read_as_a_different_order(nccl):
    """A graph loaded from Inductor's cache is logged as called with "compile_id": null; rank 0 of
    the diverging FSDP run loaded every graph from the cache while rank 1 compiled its new shape."""
    store, run_of = nccl
    name = _named("fsdp-mlp_v2-rank1-diverges")[0]
    raw = RAW[name]
    orders = {r: [c["compile_id"] for c in raw.artifact(r, "graph_execution")[0]["graph_execution_order"]]
              for r in (0, 1)}
    assert None in orders[0] and any(c is not None for c in orders[1])
    with store.read() as con:
        per = ranks.per_rank(con, Filters(run_id=run_of[name])).set_index("rank")
        div = ranks.divergence(con, Filters(run_id=run_of[name]))
    assert per.loc[0, "execution_order"].count(ranks.UNNAMED_CALL) == orders[0].count(None)
    assert "execution order" not in set(div["aspect"])


def test_compiling_blocks_before_sharding_breaks_at_fsdp_hooks_with_the_fix(nccl):
    store, run_of = nccl

    def fsdp_breaks(name):
        return {rank: n for (rank, where), n in RAW[name].text_breaks().items() if "torch/distributed/fsdp/" in where}

    wrong = [fsdp_breaks(n) for n in _named("fsdp-mlp_v3-compiled-inside")]
    right = [fsdp_breaks(n) for n in _named("fsdp-mlp_v1-clean")]
    for w in wrong:
        assert set(w) == {0, 1} and all(w[r] > max(x.get(r, 0) for x in right) for r in (0, 1)), (w, right)
    # the fix the hint gives, run: each block a compiled module, then sharded; no break at all
    fixed = _named("fsdp-mlp_v4-blocks-compiled")
    assert fixed and all(not RAW[n].text_breaks() for n in fixed)
    with store.read() as con:
        for name in fixed:
            assert con.execute("SELECT count(*) FROM graph_breaks WHERE run_id = ?", [run_of[name]]).fetchone()[0] == 0
            assert all(RAW[name].compile_ids(r) for r in (0, 1))
    with store.read() as con:
        for name in _named("fsdp-mlp_v3-compiled-inside"):
            stored = dict(con.execute("SELECT rank, count(*) FROM graph_breaks WHERE run_id = ? GROUP BY rank",
                                      [run_of[name]]).fetchall())
            assert stored == fsdp_breaks(name)
        rows = hotspots.hotspots(con, Filters(models=("fsdp-mlp",)))
    assert len(rows) and all("torch/distributed/fsdp/" in f for f in rows["user_file"])
    for f, reason, why in zip(rows["user_file"], rows["reason"], rows["explanation"]):
        assert "fully_shard(model.blocks[i])" in wrapper_hint(f, reason, why)
    with store.read() as con:
        ddp = hotspots.hotspots(con, Filters(models=("ddp-mlp",)))
    # DDP's own forward: torch reports some of its breaks at DDP's file, others at contextlib.py
    # (the _inside_ddp_forward context manager), which the explanation names
    rows = list(zip(ddp["user_file"], ddp["reason"], ddp["explanation"]))
    in_ddp = [r for r in rows if r[0].endswith("torch/nn/parallel/distributed.py")
              or "DistributedDataParallel._inside_ddp_forward" in (r[2] or "")]
    assert {f.rsplit("/", 1)[1] for f, _, _ in in_ddp} == {"contextlib.py", "distributed.py"}
    assert all("DDP(torch.compile(model))" in wrapper_hint(*r) for r in in_ddp)
    in_script = [r for r in rows if r[0].endswith("dist_train.py")]
    assert in_script and all(wrapper_hint(*r) is None for r in in_script)


def test_a_run_is_reviewed_by_its_own_slowest_rank(nccl):
    """The review's compile time of a multi-rank run is its slowest rank's total from that run's
    traces: never one rank of one run beside another rank of another."""
    store, run_of = nccl
    with store.read() as con:
        got = dict(con.execute("SELECT run_id, value FROM run_metrics WHERE metric = 'compile_time'").fetchall())
    slowest = defaultdict(int)
    for name, raw in RAW.items():
        per = {r: raw.compile_seconds(r) for r in (0, 1)}
        assert got[run_of[name]] == pytest.approx(max(per.values()), rel=1e-6), name
        slowest[name.rsplit("_run", 1)[0]] += max(per, key=per.get)
    # the rank that diverged compiled more, so it is what its run is reviewed by
    assert slowest["ddp-mlp_v2-rank1-diverges"] == 2
