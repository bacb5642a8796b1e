"""Why the compile cache missed, on real CPU runs made with `compilewatch collect`
(tests/fixtures/cache_miss, its README says how): one job run twice and then with one part of the
cache key changed, all with one TORCHINDUCTOR_CACHE_DIR. The plain rerun hits and nothing is blamed;
the changed runs miss, and the cause names the part that differed, the same in `compilewatch diff`
(text and --json) as in review/cache_miss.py; on DuckLake as on the embedded store."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.ingest.formats import cache_key
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.baseline import parse_spec
from compilewatch.review.cache_miss import describe, summary, why_missed
from compilewatch.review.weekly import review
from compilewatch.store import open_store
from tests.review.check_cli import check_causes

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "cache_miss"
BUNDLES = sorted(FIXTURES.glob("cmjob-2026*.tar.gz"))
AOT_DEBUG = sorted(FIXTURES.glob("cmjob-aot-*.tar.gz"))     # TORCH_LOGS +aot: AOTAutograd's components too


def _runs(store) -> dict[str, str]:
    """cold, warm (the v1 rerun), config, batch -> run id."""
    with store.read() as con:
        found = con.execute("SELECT run_id, label FROM runs ORDER BY started_at").fetchall()
    assert [label for _, label in found] == ["v1", "v1", "v2-config", "v2-batch"]
    return dict(zip(("cold", "warm", "config", "batch"), (rid for rid, _ in found)))


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cache-miss") / "cw.duckdb"
    assert ingest_paths(open_store(path), BUNDLES).ok
    return path


def _diff_json(db: Path, a: str, b: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "compilewatch", "diff", a, b, "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _diff_text(db: Path, a: str, b: str) -> str:
    r = subprocess.run([sys.executable, "-m", "compilewatch", "diff", a, b, "--db", str(db)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_key_and_its_components_are_kept_per_lookup(db):
    runs = _runs(open_store(db))
    with open_store(db).read() as con:
        events = con.execute("""SELECT cache, outcome, cache_key FROM cache_events WHERE run_id = ?
                                ORDER BY line_no""", [runs["warm"]]).fetchall()
        parts = dict(con.execute("""SELECT part, count(*) FROM cache_key_components WHERE run_id = ?
                                    AND cache = 'fx_graph' GROUP BY part""", [runs["warm"]]).fetchall())
        asserts = con.execute("""SELECT DISTINCT part, text FROM cache_key_components
                                 WHERE run_id = ? AND name = 'inductor_config[size_asserts]'""", [runs["config"]]).fetchall()
    assert sorted(o for _, o, _ in events) == ["hit", "hit", "hit"] and all(k for _, _, k in events)
    # torch 2.13 logs the FX graph key's components; each one's part, from ingest/formats/cache_key.py
    assert {cache_key.GRAPH, cache_key.CONFIG, cache_key.TORCH_VERSION, cache_key.INPUTS} <= set(parts)
    assert parts[cache_key.GRAPH] == 2 and cache_key.OTHER not in parts   # gm, forward and backward
    assert asserts == [("config", "False")]


def test_a_plain_rerun_hits_and_nothing_is_blamed(db):
    runs = _runs(open_store(db))
    with open_store(db).read() as con:
        assert why_missed(con, runs["cold"], runs["warm"]) == []
        assert summary([]) is None
    out = _diff_json(db, runs["cold"], runs["warm"])
    assert out["cache_misses"] == [] and out["cache_summary"] is None
    assert "no lookup missed where the baseline's hit" in _diff_text(db, runs["cold"], runs["warm"])


def test_a_changed_inductor_setting_is_the_cause(db):
    runs = _runs(open_store(db))
    with open_store(db).read() as con:
        misses = why_missed(con, runs["warm"], runs["config"])
    by = {(m.cache, m.graph): m for m in misses}
    assert set(by) == {("aotautograd", None), ("fx_graph", "forward"), ("fx_graph", "backward")}
    for graph in ("forward", "backward"):
        m = by[("fx_graph", graph)]
        assert (m.baseline_outcome, m.candidate_outcome) == ("hit", "miss") and m.baseline_key != m.candidate_key
        assert m.parts == [cache_key.CONFIG] and m.components_logged
        assert [(c.name, c.before, c.after) for c in m.changes] == [("inductor_config[size_asserts]", "True", "False")]
    # AOTAutograd's components are not logged in 2.13: its parts are those of the same compile's FX graph keys
    aot = by[("aotautograd", None)]
    assert not aot.components_logged and aot.parts == [cache_key.CONFIG]
    cause = summary(misses)
    assert cause.startswith("the FX graph cache missed on forward of loss_of (0/0): "
                            "the inductor config differed (size_asserts: True → False)")
    # the diff says the same, in JSON and as text
    out = _diff_json(db, runs["warm"], runs["config"])
    assert out["cache_summary"] == cause
    assert [(m["cache"], m["graph"], m["parts"]) for m in out["cache_misses"]] == \
        [(m.cache, m.graph, m.parts) for m in misses]
    text = _diff_text(db, runs["warm"], runs["config"])
    assert by[("fx_graph", "forward")].sentence() in text
    assert "config: inductor_config[size_asserts]: True -> False" in text


def test_other_input_shapes_are_the_input_metadata(db):
    runs = _runs(open_store(db))
    with open_store(db).read() as con:
        misses = why_missed(con, runs["warm"], runs["batch"])
    back = next(m for m in misses if m.graph == "backward")
    assert back.parts == [cache_key.INPUTS]
    assert ("shape=torch.Size([8, 16])", "shape=torch.Size([12, 16])") in [(c.before, c.after) for c in back.changes]
    fwd = next(m for m in misses if m.graph == "forward")
    assert cache_key.INPUTS in fwd.parts
    assert "the input metadata differed (example_inputs[" in summary(misses)
    assert _diff_json(db, runs["warm"], runs["batch"])["cache_summary"] == summary(misses)


def test_both_cold_under_other_keys_still_name_the_part(db):
    """The baseline missed too (a fresh cache), under another key: the parts are still told."""
    runs = _runs(open_store(db))
    with open_store(db).read() as con:
        misses = why_missed(con, runs["cold"], runs["config"])
        same_key = why_missed(con, runs["warm"], runs["cold"])
    assert {m.baseline_outcome for m in misses} == {"miss"}
    assert all(m.parts == [cache_key.CONFIG] for m in misses)
    # the other way round the cold run missed under the very keys the warm run hit: not in the cache
    assert same_key and all(not m.parts and m.baseline_key == m.candidate_key for m in same_key)
    assert "the key was the same, the entry was not in the cache" in describe(same_key)


def test_aotautograd_components_at_debug_name_the_part_themselves(tmp_path):
    """With TORCH_LOGS +aot, torch 2.13 logs AOTAutograd's key components as 2.11 did by default: its
    miss is explained by its own key, not the FX graph's."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, AOT_DEBUG).ok
    with store.read() as con:
        (warm, _), (config, _) = con.execute("SELECT run_id, label FROM runs ORDER BY started_at").fetchall()
        misses = why_missed(con, warm, config)
    aot = next(m for m in misses if m.cache == "aotautograd")
    assert aot.components_logged and aot.parts == [cache_key.CONFIG]
    assert [(c.name, c.before, c.after) for c in aot.changes] == [("inductor_config[size_asserts]", "True", "False")]
    assert aot.sentence() == "the AOTAutograd cache missed on loss_of (0/0): " \
                             "the inductor config differed (size_asserts: True → False)"


def test_a_torch_log_of_aotautograd_key_details_is_text_not_binary(tmp_path):
    """TORCH_LOGS +aot logs the AOTAutograd key's components, torch_version's hash bytes among them
    (NULs, control characters): the file is still a TORCH_LOGS text, so the bundle stores whole."""
    import tarfile

    from compilewatch.ingest.file_kind import TORCH_LOGS, sniff
    with tarfile.open(AOT_DEBUG[0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("torch_logs.txt"))
        head = tar.extractfile(member).read()
    assert b"Autograd graph cache hash details for key" in head[:4096] and b"\x00" in head[:4096]
    (tmp_path / "torch_logs.txt").write_bytes(head)
    assert sniff(tmp_path / "torch_logs.txt").kind == TORCH_LOGS


def test_another_torch_is_the_torch_build(tmp_path):
    """The same bench command under torch 2.13.0 and 2.14.1 (sample_logs, both cold): the torch build
    is told first, by the runs' versions (torch logs a hash of its sources), then the settings it
    added or changed."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [REPO / "sample_logs" / "cpu-torch2.13" / "mlp_default_infer.tar.gz",
                                REPO / "sample_logs" / "cpu-torch2.14.1" / "mlp_default_infer.tar.gz"]).ok
    with store.read() as con:
        (old, _), (new, _) = con.execute("SELECT run_id, torch_version FROM runs ORDER BY torch_version").fetchall()
        misses = why_missed(con, old, new)
    fx = next(m for m in misses if m.cache == "fx_graph")
    assert fx.graph == "inference" and fx.parts[:2] == [cache_key.TORCH_VERSION, cache_key.CONFIG]
    assert (fx.changes[0].name, fx.changes[0].before, fx.changes[0].after) == ("torch_version", "2.13.0+cpu", "2.14.1+cu130")
    assert summary(misses).startswith("the FX graph cache missed on inference of inner (0/0): "
                                      "the torch build differed (torch_version: 2.13.0+cpu → 2.14.1+cu130)")


def test_ducklake_tells_the_same_cause(lake_store, db):
    assert ingest_paths(lake_store, BUNDLES).ok
    lake, emb = _runs(lake_store), _runs(open_store(db))
    with lake_store.read() as con:
        on_lake = summary(why_missed(con, lake["warm"], lake["config"]))
    with open_store(db).read() as con:
        embedded = summary(why_missed(con, emb["warm"], emb["config"]))
    assert on_lake == embedded and "size_asserts" in on_lake


def test_another_process_group_is_named_on_both_ranks(tmp_path):
    """Two gloo ranks whose compiled all_reduce runs over a group named '1', then (another group made
    first) '2': the graphs are otherwise the same, so the part is the process group, on each rank."""
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, sorted(FIXTURES.glob("cmjob-pg-*.tar.gz"))).ok
    with store.read() as con:
        (v1, _), (v2, _) = con.execute("SELECT run_id, label FROM runs ORDER BY started_at").fetchall()
        by_rank = {rank: why_missed(con, v1, v2, rank=rank) for rank in (0, 1)}
    for misses in by_rank.values():
        fx = next(m for m in misses if m.cache == "fx_graph")
        assert (fx.baseline_outcome, fx.candidate_outcome) == ("miss", "miss") and fx.graph == "inference"
        assert fx.parts == [cache_key.PROCESS_GROUP]
        assert [(c.name, c.before, c.after) for c in fx.changes] == [("gm", "1", "2")]
        assert summary(misses).startswith("the FX graph cache missed on inference of step (0/0): "
                                          "a process-group name differed (1 → 2, in the graph's collectives)")


@pytest.mark.parametrize("before, after, part", [
    ("_c10d_functional.all_reduce.default(arg0_1, 'sum', '0')", "_c10d_functional.all_reduce.default(arg0_1, 'sum', '3')",
     cache_key.PROCESS_GROUP),
    ("_c10d_functional.all_reduce.default(arg0_1, 'sum', '0')", "_c10d_functional.all_reduce.default(arg0_1, 'avg', '0')",
     cache_key.GRAPH),
])
def test_a_graph_that_differs_only_in_a_group_name_is_the_process_group(before, after, part):
    # the line as a 2.11 DDP run on two H200s logged it (sample_logs/gpu-h200x2-nccl-torch2.11); cut: not whole
    assert cache_key.graph_change_part(before, after) == part
    assert cache_key.graph_change_part(before, after, cut=True) == cache_key.GRAPH


def _collect_cmjob(out: Path, version: str, label: str, cache: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "compilewatch", "collect", "--archive", "--no-probe",
                        "--model", "cmjob-fresh", "--label", label, "--out", str(out), "--",
                        sys.executable, str(FIXTURES / "job.py"), "--version", version],
                       env=env, cwd=out, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.fixture(scope="module")
def changed_key_db(tmp_path_factory) -> Path:
    """Fresh runs of job.py as a team's CI sees a config change: a cache folder that v1's runs fill
    (a first run, not judged) and then hit three times; v2-config three times, each in its own copy
    of that folder, so each misses where v1 hit, on one Inductor setting in the key. Three a side,
    not two: with two, a loaded machine's spread between the two hits once left the slower compile
    within the noise, and the test found no worse compile time to explain."""
    work = tmp_path_factory.mktemp("changed-key")
    out = work / "bundles"
    out.mkdir()
    shared = work / "cache-v1"
    _collect_cmjob(work, "v1", "fill", shared)
    for _ in range(3):
        _collect_cmjob(out, "v1", "v1", shared)
    for n in range(3):
        copy = work / f"cache-v2-{n}"
        shutil.copytree(shared, copy)
        _collect_cmjob(out, "v2-config", "v2-config", copy)
    db = work / "cw.duckdb"
    assert ingest_paths(open_store(db), sorted(out.glob("*.tar.gz"))).ok
    return db


def test_the_verdict_on_a_changed_cache_key_names_the_part_the_diff_names(changed_key_db):
    """The compile got slower because the cache missed; the verdict says so, and which part of the
    key differed, as `compilewatch diff` says it on the runs the cause read, in `check --json` too."""
    base, cand = "label=v1,model=cmjob-fresh", "label=v2-config,model=cmjob-fresh"
    with open_store(changed_key_db).read() as con:
        rates = dict(con.execute("""SELECT r.label, list(m.value) FROM run_metrics m JOIN runs r USING (run_id)
                                    WHERE m.metric = 'cache_hit_rate' GROUP BY ALL""").fetchall())
        # what makes the case: v1's runs hit every lookup, v2-config's hit none
        assert sorted(rates) == ["v1", "v2-config"] and min(rates["v1"]) > 0 and max(rates["v2-config"]) == 0, rates
        r = review(con, parse_spec(base), parse_spec(cand))
    worse = [v for v in r.verdicts if v.worse and v.metric in ("compile_time", "time_to_first_step")]
    assert any(v.metric == "compile_time" for v in worse), [(v.metric, v.status, v.summary) for v in r.verdicts]
    said = check_causes(changed_key_db, base, cand)
    for v in worse:
        assert v.cause is not None, v.summary
        miss = next(x for x in v.cause.parts if x.kind == "cache_miss")
        pair = _diff_json(changed_key_db, miss.fields["baseline_run"], miss.fields["candidate_run"])
        assert miss.fields["candidate_run"] in v.candidate.run_ids and miss.fields["baseline_run"] in v.baseline.run_ids
        # the part of the key the diff names is the cause's: the one Inductor setting
        assert {tuple(m["parts"]) for m in pair["cache_misses"]} == {(cache_key.CONFIG,)}
        assert miss.text == pair["cache_summary"]
        assert "the inductor config differed (size_asserts: True → False)" in v.cause.text, v.cause.text
        assert said[(v.metric, v.subject)] == json.loads(json.dumps(v.cause.to_json()))
