"""Whether two sides compiled the same graphs, per frame, and what changed in words
(review/graphs.py), on real CPU runs of tests/fixtures/graphs/blocks_job.py made with
`compilewatch collect` (its README says how): a cold and a warm run of v1, and v1 with its lines
moved, compile the same graphs;
v3 (activation checkpointing) and v4 (float64 inputs, a Python-float scale) do not, and the words
name the checkpoint ops, the kernel count and the guards' dtype and kind. Each is checked against
`compilewatch diff` on the same runs. The H100 torch 2.11 runs of sample_logs/gpu-h100-torch2.11-cudagraphs
add two cold runs in two Inductor cache folders and a warm run in one of them."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.baseline import parse_spec
from compilewatch.review.graphs import compare_graphs, describe_change, frame_fingerprints
from compilewatch.review.weekly import review
from compilewatch.store import open_store
from tests.review.check_cli import check_causes
from compilewatch.store.rollups import refresh_rollups

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "tests" / "fixtures" / "graphs"
CUDAGRAPHS = REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs"
FORWARD = ("forward", "blocks_job.py", 44)


def _store(tmp_path_factory, paths: list[Path]) -> tuple[Path, dict[str, list[str]]]:
    """A store of `paths` and its runs by label, oldest first."""
    db = tmp_path_factory.mktemp("graphs") / "cw.duckdb"
    assert ingest_paths(open_store(db), paths).ok
    runs: dict[str, list[str]] = {}
    with open_store(db).read() as con:
        for rid, label in con.execute("SELECT run_id, label FROM runs ORDER BY started_at").fetchall():
            runs.setdefault(label, []).append(rid)
    return db, runs


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    # the CPU runs made here; the GPU pair (blocks_v1_cuda, blocks_v1_cpu) is test_a_device_move_is_named's
    db, labels = _store(tmp_path_factory, sorted(p for p in GRAPHS.glob("blocks_*.tar.gz")
                                                 if not p.name.startswith(("blocks_v1_cuda", "blocks_v1_cpu"))))
    runs = {"v1_cold": labels["v1"][0], "v1_warm": labels["v1"][1], "v3_cold": labels["v3"][0],
            "v4_cold": labels["v4"][0], "v1_moved": labels["v1"][2]}
    with open_store(db).read() as con:   # the second v1 run is the one that loaded from the caches
        hits = dict(con.execute("SELECT run_id, count(*) FILTER (WHERE outcome = 'hit') FROM cache_events "
                                "GROUP BY run_id").fetchall())
    assert hits[runs["v1_warm"]] >= 2 and not any(hits[runs[k]] for k in ("v1_cold", "v3_cold", "v4_cold", "v1_moved")), hits
    return db, runs


def _diff(db: Path, a: str, b: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "compilewatch", "diff", a, b, "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _compare(db: Path, base: list[str], cand: list[str]):
    with open_store(db).read() as con:
        return compare_graphs(frame_fingerprints(con, base + cand), base, cand)


def test_a_cold_and_a_warm_run_compile_the_same_graphs(blocks):
    db, runs = blocks
    cmp = _compare(db, [runs["v1_cold"]], [runs["v1_warm"]])
    assert cmp.same is True and cmp.changed == [] and cmp.frames == 1 and cmp.unknown_runs == []
    # the diff of the same runs agrees
    with open_store(db).read() as con:
        assert describe_change(con, runs["v1_cold"], runs["v1_warm"], FORWARD).sentence.endswith("no change")
    assert [p["changed"] for p in _diff(db, runs["v1_cold"], runs["v1_warm"])["pairs"]] == [False]


def test_activation_checkpointing_changes_the_graphs_and_says_how(blocks):
    db, runs = blocks
    cmp = _compare(db, [runs["v1_cold"], runs["v1_warm"]], [runs["v3_cold"]])
    assert cmp.same is False
    (change,) = cmp.changed
    assert change.frame == FORWARD and change.compiles == (1, 1)
    assert {"dynamo", "aot_fwd", "aot_bwd", "code"} <= set(change.parts)
    with open_store(db).read() as con:
        s = describe_change(con, runs["v1_cold"], runs["v3_cold"], change.frame)
    (pair,) = _diff(db, runs["v1_cold"], runs["v3_cold"])["pairs"]
    # the words are the diff's: the same ops, kernels and counts
    assert s.ops_added == {"tag_activation_checkpoint": pair["ops_added"]["torch.ops.higher_order.tag_activation_checkpoint"]} == {"tag_activation_checkpoint": 2}
    assert s.kernel_count == (pair["kernel_count"]["baseline"], pair["kernel_count"]["candidate"]) == (12, 13)
    assert s.kernels_added == pair["kernels_added"] and s.cpp_kernels_added and not s.triton_kernels_added
    assert s.guards_added == pair["guards_added"] == ["TRUE_MATCH: L['self'].checkpointed == True"]
    assert s.sentence.startswith("forward (blocks_job.py:44): +2 tag_activation_checkpoint;"), s.sentence
    assert "kernels 12 → 13" in s.sentence and "guard on self.checkpointed changed" in s.sentence
    assert "new C++ kernels cpp_fused_" in s.sentence


def test_a_dtype_and_an_input_turned_python_float_are_named(blocks):
    db, runs = blocks
    cmp = _compare(db, [runs["v1_cold"]], [runs["v4_cold"]])
    assert cmp.same is False and cmp.changed[0].frame == FORWARD and "guards" in cmp.changed[0].parts
    with open_store(db).read() as con:
        s = describe_change(con, runs["v1_cold"], runs["v4_cold"], FORWARD)
    (pair,) = _diff(db, runs["v1_cold"], runs["v4_cold"])["pairs"]
    assert s.guards_added == pair["guards_added"] and s.guards_removed == pair["guards_removed"]
    by_source = {c.source: c for c in s.guard_changes}
    assert by_source["L['x']"].dtype == ("float32", "float64") and by_source["L['x']"].device is None
    assert by_source["L['scale']"].kind == ("tensor cpu float32", "float")
    assert "EQUALS_MATCH: L['scale'] == 0.5" in pair["guards_added"]
    moved = [c for c in s.guard_changes if c.dtype == ("float32", "float64")]
    assert len(moved) == 15          # x and the 14 parameters
    assert "guard on scale: tensor cpu float32 → float" in s.sentence, s.sentence
    assert "guards on x, self.blocks.0.down.bias (+13 more): float32 → float64" in s.sentence, s.sentence


# a tensor guard's source and dtype as `compilewatch diff` prints it (one source has no comma in it)
_TENSOR_GUARD = re.compile(r"^TENSOR_MATCH: check_tensor\(([^,]+), \w+, DispatchKeySet\([^)]*\), torch\.(\w+),")


def _guard_dtypes(lines: list[str]) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in map(_TENSOR_GUARD.match, lines) if m}


def test_the_verdict_on_a_dtype_and_a_python_float_names_what_the_diff_shows(blocks):
    """v1 (its cold and warm runs) against v4: the step got slower, and the verdict's cause is the
    changed guards and kernels of `forward`, the same ones `compilewatch diff` shows on the runs the
    cause read, in the review and in `compilewatch check --json`."""
    db, runs = blocks
    base, cand = f"run={runs['v1_cold']},run={runs['v1_warm']}", f"run={runs['v4_cold']}"
    with open_store(db).read() as con:
        r = review(con, parse_spec(base), parse_spec(cand))
    worse = [v for v in r.verdicts if v.worse]
    assert worse, [(v.metric, v.status) for v in r.verdicts]
    said = check_causes(db, base, cand)
    for v in worse:
        assert v.cause is not None, v.summary
        graphs = next(x for x in v.cause.parts if x.kind == "graphs").fields
        assert (graphs["co_name"], graphs["co_file"], graphs["co_firstlineno"]) == FORWARD
        assert graphs["candidate_run"] == runs["v4_cold"] and graphs["baseline_run"] in (runs["v1_cold"], runs["v1_warm"])
        (pair,) = _diff(db, graphs["baseline_run"], graphs["candidate_run"])["pairs"]
        # the kernels the diff names are the cause's, and the new C++ ones are named in its sentence
        assert graphs["kernels_added"] == pair["kernels_added"] and graphs["kernels_removed"] == pair["kernels_removed"]
        assert graphs["cpp_kernels_added"] and all(k in v.cause.text for k in graphs["cpp_kernels_added"])
        # every source whose tensor guard went float32 -> float64 in the diff, and none other
        before, after = _guard_dtypes(pair["guards_removed"]), _guard_dtypes(pair["guards_added"])
        moved = {s for s in before if (before[s], after.get(s)) == ("float32", "float64")}
        assert len(moved) == 15 and {c["source"] for c in graphs["guard_changes"] if c["dtype"] == ["float32", "float64"]} == moved
        # `scale`: a 0-d float32 tensor in the diff's removed guards, a Python float compared by value in its added ones
        assert before["L['scale']"] == "float32" and "EQUALS_MATCH: L['scale'] == 0.5" in pair["guards_added"]
        scale = next(c for c in graphs["guard_changes"] if c["source"] == "L['scale']")
        assert scale["kind"] == ["tensor cpu float32", "float"]
        assert "guard on scale: tensor cpu float32 → float" in v.cause.text, v.cause.text
        assert "guards on x, self.blocks.0.down.bias (+13 more): float32 → float64" in v.cause.text, v.cause.text
        # `check --json` carries the same cause with its parts
        assert said[(v.metric, v.subject)] == json.loads(json.dumps(v.cause.to_json()))


def test_an_edit_that_moves_the_frame_changes_no_graph(blocks):
    """blocks_v1_moved: three lines added above the model move `forward` from line 44 to 47 and
    every source line its graphs quote by 3. The frames pair as the diff pairs them (same function,
    same file), and the graphs are the same, for the review and for the diff."""
    db, runs = blocks
    cmp = _compare(db, [runs["v1_cold"]], [runs["v1_moved"]])
    assert cmp.same is True and cmp.frames == 1
    (pair,) = _diff(db, runs["v1_cold"], runs["v1_moved"])["pairs"]
    assert pair["frame"]["line"] == 44 and pair["changed"] is False and pair["graphs_changed"] == []
    with open_store(db).read() as con:
        frames = frame_fingerprints(con, [runs["v1_moved"]])
        assert frames["co_firstlineno"].tolist() == [47]
        assert describe_change(con, runs["v1_cold"], runs["v1_moved"], ("forward", "blocks_job.py", 47)).sentence \
            == "forward (blocks_job.py:47): no change"


def test_a_frame_on_one_side_only_is_a_change(blocks):
    db, runs = blocks
    with open_store(db).read() as con:
        frames = frame_fingerprints(con, [runs["v1_cold"], runs["v1_warm"]])
    other = frames[frames["run_id"] == runs["v1_warm"]].assign(co_name="forward_renamed")
    frames = frames[frames["run_id"] == runs["v1_cold"]]
    cmp = compare_graphs(pd.concat([frames, other]), [runs["v1_cold"]], [runs["v1_warm"]])
    assert cmp.same is False and sorted(c.parts for c in cmp.changed) == [("frame",), ("frame",)]


def test_runs_without_fingerprints_are_not_judged(blocks, tmp_path):
    """A run stored before fingerprints (its artifacts' fp empty, as migration 020 leaves them) is
    listed, not compared; `compilewatch reingest` fills it."""
    db, runs = blocks
    shutil.copytree(db.parent, tmp_path / "old")   # the store with its raw copies, which reingest reads
    copy = tmp_path / "old" / db.name
    store = open_store(copy)
    with store.write() as con:
        con.execute("UPDATE artifacts SET fp = NULL WHERE run_id = ?", [runs["v3_cold"]])
        con.execute("UPDATE files SET parser_version = 9 WHERE run_id = ?", [runs["v3_cold"]])
        refresh_rollups(con, [runs["v3_cold"]])
    cmp = _compare(copy, [runs["v1_cold"]], [runs["v3_cold"]])
    assert cmp.same is None and cmp.unknown_runs == [runs["v3_cold"]]
    p = subprocess.run([sys.executable, "-m", "compilewatch", "reingest", "--db", str(copy)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    cmp = _compare(copy, [runs["v1_cold"]], [runs["v3_cold"]])
    assert cmp.same is False and cmp.changed[0].frame == FORWARD


@pytest.fixture(scope="module")
def cudagraph_runs(tmp_path_factory):
    paths = sorted(CUDAGRAPHS.glob("tiny-lm-ro_*.tar.gz"))
    if not paths:
        pytest.skip("sample_logs/gpu-h100-torch2.11-cudagraphs holds no bundles")
    return _store(tmp_path_factory, paths)


def test_gpu_runs_in_other_cache_folders_and_a_warm_run_compile_the_same_graphs(cudagraph_runs):
    """Two cold H100 runs, each in a fresh Inductor cache folder, and a warm run in the first one's:
    their output code names its kernels' files in those folders; the graphs are the same, and the
    diff says so too."""
    db, runs = cudagraph_runs
    clean, warm = runs["clean"], runs["clean-warm-cache"]
    cmp = _compare(db, clean, warm)
    assert cmp.same is True and cmp.frames == 2
    assert _compare(db, clean[:1], clean[1:]).same is True
    assert not any(p["changed"] for p in _diff(db, clean[0], clean[1])["pairs"])
    changed = _compare(db, clean, runs["changed"])
    assert changed.same is False
    assert {c.frame[0] for c in changed.changed} >= {"forward"}
    assert any(c.parts == ("frame",) for c in changed.changed)    # token_accuracy_to_host, track_logit_mean
    with open_store(db).read() as con:
        s = describe_change(con, clean[0], runs["changed"][0], changed.changed[0].frame)
    assert s.sentence and (s.kernels_added or s.ops_added or s.guard_changes or s.compiles[0] != s.compiles[1])


def test_tensor_guards_read_their_device_and_dtype(blocks, cudagraph_runs):
    """The TENSOR_MATCH leaves of real guard trees: the H100 runs' inputs on cuda:0, the CPU runs' on
    the CPU, each with its dtype."""
    from compilewatch.deepdive.artifacts import fetch
    from compilewatch.ingest.formats.artifact_text import guard_set, tensor_guard

    def inputs(db: Path) -> dict[str, tuple]:
        with open_store(db).read() as con:
            run, fid, line = con.execute("SELECT run_id, file_id, line_no FROM artifacts "
                                         "WHERE kind = 'dynamo_cpp_guards_str' ORDER BY run_id LIMIT 1").fetchall()[0]
            text = fetch(con, run, fid, line).text
        found = [tensor_guard(g) for g in guard_set(text)]
        return {t[0]: t[1:] for t in found if t}

    gpu, cpu = inputs(cudagraph_runs[0]), inputs(blocks[0])
    assert gpu["L['idx']"] == ("cuda:0", "int64") and gpu["L['act_ema']"] == ("cuda:0", "float32")
    assert cpu["L['x']"] in (("cpu", "float32"), ("cpu", "float64"))
    assert tensor_guard("EQUALS_MATCH: L['scale'] == 0.5") is None


def test_a_device_move_is_named(tmp_path_factory):
    """blocks_job.py v1 on a GPU and on the CPU (`MAKE=gpu bash make_graph_bundles.sh`, on a GPU host):
    every tensor guard moved cuda:0 -> cpu, and the new kernels are C++ where they were Triton."""
    paths = [GRAPHS / "blocks_v1_cuda.tar.gz", GRAPHS / "blocks_v1_cpu.tar.gz"]
    if not all(p.exists() for p in paths):
        pytest.skip("the GPU bundles of `MAKE=gpu make_graph_bundles.sh` are not in tests/fixtures/graphs")
    db, labels = _store(tmp_path_factory, paths)
    cmp = _compare(db, labels["v1-cuda"], labels["v1-cpu"])
    assert cmp.same is False and cmp.changed[0].frame == FORWARD
    with open_store(db).read() as con:
        s = describe_change(con, labels["v1-cuda"][0], labels["v1-cpu"][0], FORWARD)
    x = next(c for c in s.guard_changes if c.source == "L['x']")
    assert x.device == ("cuda:0", "cpu") and x.dtype is None
    assert s.cpp_kernels_added and not s.triton_kernels_added
    assert any(k.startswith("triton_") for k in s.kernels_removed)
    assert "moved cuda:0 → cpu" in s.sentence and "new C++ kernel" in s.sentence, s.sentence
    (pair,) = _diff(db, labels["v1-cuda"][0], labels["v1-cpu"][0])["pairs"]
    assert s.guards_added == pair["guards_added"]
