"""Compile-time hotspots and runtime linkage against what the real logs contain.

Data: the two multi-rank DDP bundles in tests/fixtures/ranks/ and, for an eager baseline, the
CPU bench bundle sample_logs/cpu-torch2.13/dynamic_shapes_default_infer.tar.gz
(`compilewatch bench --models dynamic_shapes --modes default --infer --device cpu`, torch 2.13).
Expected figures are recomputed here straight from the bundles' files, not from the store.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import compile_time, ranks
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = [ROOT / "tests" / "fixtures" / "ranks" / "ddp_same.tar.gz",
           ROOT / "tests" / "fixtures" / "ranks" / "ddp_diverge.tar.gz",
           ROOT / "sample_logs" / "cpu-torch2.13" / "dynamic_shapes_default_infer.tar.gz"]
ALL_TIME = dict(start=None, end=None, limit=200)
_ENVELOPE = re.compile(r"^\S+ \S+ +\d+ \S+\] (\{.*)$")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ct") / "cw.duckdb"
    report = ingest_paths(open_store(path), BUNDLES)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return path


def _members(bundle: Path):
    with tarfile.open(bundle) as tar:
        for m in tar.getmembers():
            if m.isfile():
                yield m.name, tar.extractfile(m).read()


def _compilation_metrics(bundle: Path):
    """Every compilation_metrics payload of the bundle's TORCH_TRACE files."""
    for _, env in _envelopes(bundle):
        if "compilation_metrics" in env:
            yield env["compilation_metrics"]


def _envelopes(bundle: Path):
    """(trace file, envelope) of every record of the bundle's TORCH_TRACE files."""
    for name, data in _members(bundle):
        if "/trace/" not in name:
            continue
        for line in data.decode().splitlines():
            m = _ENVELOPE.match(line)
            if m:
                yield name, json.loads(m.group(1))


def _later_seconds(bundle: Path) -> dict:
    """(trace file, frame, compile) -> the backward compile's and the runtime autotuning's seconds of
    that frame compile (bwd_compilation_metrics, *_runtime): what its compile time adds to its
    forward's (store/compile_time.py)."""
    out = defaultdict(float)
    for name, env in _envelopes(bundle):
        key = (name, env.get("frame_id"), env.get("frame_compile_id"))
        if "bwd_compilation_metrics" in env:
            out[key] += env["bwd_compilation_metrics"]["backward_cumulative_compile_time_us"] / 1e6
        for event in ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime"):
            if event in env:
                out[key] += (env[event].get("runtime_triton_autotune_time_us") or 0) / 1e6
    return out


def _compiles_with_cache_misses(bundle: Path):
    """(trace file, frame, compile, attempt) of every compile that logged a cache-miss artifact, and
    every compile's (same key) -> (co_name, base name:line, its compile time: forward + backward +
    runtime autotuning)."""
    missed, compiles = set(), {}
    later = _later_seconds(bundle)
    for name, env in _envelopes(bundle):
        key = (name, env.get("frame_id"), env.get("frame_compile_id"), env.get("attempt") or 0)
        art = env.get("artifact")
        if isinstance(art, dict) and art.get("name", "").endswith("_cache_miss"):
            missed.add(key)
        cm = env.get("compilation_metrics")
        if cm and cm.get("co_name"):
            compiles[key] = (cm["co_name"], f"{cm['co_filename'].rsplit('/', 1)[-1]}:{cm['co_firstlineno']}",
                             (cm.get("entire_frame_compile_time_s") or 0) + later.pop(key[:3], 0.0))
    return missed, compiles


def test_frame_hotspots_sum_the_logged_compile_times(db):
    expected = defaultdict(lambda: [0, 0.0, 0.0])   # (co_name, base name:line) -> n, forward, total
    for b in BUNDLES:
        _, compiles = _compiles_with_cache_misses(b)
        forwards = [cm for cm in _compilation_metrics(b) if cm.get("co_name")]
        assert len(forwards) == len(compiles)
        for cm in forwards:
            e = expected[(cm["co_name"], f"{cm['co_filename'].rsplit('/', 1)[-1]}:{cm['co_firstlineno']}")]
            e[0] += 1
            e[1] += cm.get("entire_frame_compile_time_s") or 0
        for co_name, code, seconds in compiles.values():
            expected[(co_name, code)][2] += seconds
    with open_store(db).read() as con:
        got = compile_time.frame_hotspots(con, Filters(**ALL_TIME))
    assert len(got) == len(expected)
    assert list(got["total_s"]) == sorted(got["total_s"], reverse=True)
    assert got["share_pct"].sum() == pytest.approx(100)
    assert got["backward_s"].sum() > 0      # the DDP bundles are training jobs
    for row in got.itertuples():
        n, forward, total = expected[(row.co_name, row.code)]
        assert row.compiles == n
        assert row.total_s == pytest.approx(total)
        assert row.forward_s == pytest.approx(forward)
        assert row.total_s == pytest.approx(row.forward_s + row.backward_s + row.runtime_autotune_s)
        # the forward's phases never exceed the forward; tracing is what the backend did not take
        assert row.tracing_s + row.aot_s + row.inductor_s + row.autotune_s <= row.forward_s + 1e-9
    miss_s = defaultdict(float)
    for b in BUNDLES:
        missed, compiles = _compiles_with_cache_misses(b)
        for key in missed & set(compiles):
            co_name, code, seconds = compiles[key]
            miss_s[(co_name, code)] += seconds
    assert miss_s
    for row in got.itertuples():
        assert row.cache_miss_s == pytest.approx(miss_s.get((row.co_name, row.code), 0.0)), row.code
    ddp = got[got["code"] == "ddp_train.py:31"].iloc[0]
    # the DDP forward is compiled on both ranks of both runs and recompiled on the diverging rank
    assert (ddp["co_name"], ddp["recompiles"], ddp["runs"]) == ("forward", 1, 2)
    assert ddp["dominant"] == "Inductor"


def test_search_and_versions(db):
    with open_store(db).read() as con:
        got = compile_time.frame_hotspots(con, Filters(search="ddp_train", **ALL_TIME))
        split = compile_time.phase_split(con, Filters(**ALL_TIME))
        versions = compile_time.frame_versions(con, Filters(**ALL_TIME), top=3)
        every = compile_time.frame_hotspots(con, Filters(**ALL_TIME))
    assert set(got["code"].str.split(":").str[0]) == {"ddp_train.py"}
    assert set(split["phase"]) == set(compile_time.PHASES)
    assert split["seconds"].sum() <= every["total_s"].sum() + 1e-6
    assert versions["frame"].nunique() == 3
    assert set(versions["torch_version"]) == {"2.13.0+cpu"}


def test_runtime_linkage_matches_the_timings_and_bench_files(db):
    bundle = BUNDLES[2]
    files = dict(_members(bundle))
    timings = json.loads(next(v for k, v in files.items() if k.endswith("/timings.json")))
    bench = next(csv.DictReader(io.StringIO(next(v for k, v in files.items() if k.endswith("/bench.csv")).decode())))
    compiled = next(c for c in timings["callables"] if c["mode"] == "compiled")
    steady = statistics.median(s["duration_ms"] for s in compiled["steps"] if s["phase"] == "steady")
    compiling = [s["duration_ms"] for s in compiled["steps"] if s["phase"] == "compile"]
    cost = sum(compiling) - len(compiling) * steady
    eager = float(bench["eager_latency"])
    assert eager > steady  # this benchmark's compiled model is faster, so compiling pays off at some step
    with open_store(db).read() as con:
        exact = compile_time.linkage_per_run(con, Filters(**ALL_TIME)).set_index("callable")
        # all time holds whole months: the page reads the level, its medians within the sketch's error
        got = compile_time.runtime_linkage(con, Filters(**ALL_TIME)).set_index("callable")
    for rows, rel in ((exact, 1e-6), (got, compile_time.LINKAGE_MEDIAN_ERROR)):
        row = rows.loc[compiled["name"]]
        assert row["calls"] == len(compiled["steps"]) and row["compile_steps"] == len(compiling)
        assert row["steady_ms"] == pytest.approx(steady, rel=rel)
        assert row["compile_cost_ms"] == pytest.approx(cost, rel=rel)
        assert row["eager_ms"] == pytest.approx(eager, rel=rel)
        assert row["break_even_steps"] == math.ceil(row["compile_cost_ms"] / (row["eager_ms"] - row["steady_ms"]))
        # the DDP job has no eager reference: no break-even is claimed
        ddp = rows.loc["DistributedDataParallel.forward"]
        assert ddp["runs"] == 2 and math.isnan(ddp["eager_ms"]) and math.isnan(ddp["break_even_steps"])
    assert exact.loc[compiled["name"], "break_even_steps"] == math.ceil(cost / (eager - steady))


def test_compile_time_page(app_at, db):
    at = app_at(db, "views/compile_time.py", query={"from": "2000-01-01", "to": "2100-01-01"})
    assert not at.exception and not at.error, [e.value for e in list(at.exception) + list(at.error)]
    frames = next(d.value for d in at.dataframe if "dominant" in d.value.columns)
    with open_store(db).read() as con:
        expected = compile_time.frame_hotspots(con, Filters(**ALL_TIME))
    assert list(frames["code"]) == list(expected["code"].head(len(frames)))
    # a recompiled frame links to its storm on the Recompile storms page, a frame never recompiled does not
    ddp = frames[frames["code"] == "ddp_train.py:31"].iloc[0]
    assert ddp["storm"].startswith("recompiles?") and "fn=forward" in ddp["storm"]
    assert frames[frames["recompiles"] == 0]["storm"].isna().all()
    linkage = next(d.value for d in at.dataframe if "break_even_steps" in d.value.columns)
    assert "DistributedDataParallel.forward" in set(linkage["callable"])
    assert any("medians are within 0.5% of the exact ones" in c.value for c in at.caption)


def test_run_detail_flags_diverging_ranks(app_at, db):
    with open_store(db).read() as con:
        runs = dict(con.execute("SELECT label, run_id FROM runs WHERE label LIKE 'ranks-%'").fetchall())
        expected = ranks.divergence(con, Filters(run_id=runs["ranks-diverge"]))
    at = app_at(db, "views/run_detail.py", query={"run": runs["ranks-diverge"], "from": "2000-01-01", "to": "2100-01-01"})
    assert not at.exception and not at.error
    assert any("Ranks diverge" in w.value for w in at.warning)
    shown = next(d.value for d in at.dataframe if "difference" in d.value.columns)
    assert list(shown["difference"]) == list(expected["difference"])
    assert "has 0/1" in shown.iloc[0]["difference"]

    at = app_at(db, "views/run_detail.py", query={"run": runs["ranks-same"], "from": "2000-01-01", "to": "2100-01-01"})
    assert not at.exception and not at.error
    assert not any("Ranks diverge" in w.value for w in at.warning)
    assert any("All 2 ranks agree" in s.value for s in at.success)
    per = next(d.value for d in at.dataframe if "compile_ids" in d.value.columns and "graphs" in d.value.columns)
    assert list(per["rank"]) == [0, 1]


def test_autotuning_phase_from_a_max_autotune_run(tmp_path):
    """sample_logs/gpu-h200-torch2.11/mlp_max-autotune_infer_run1 (H200, torch 2.11, mode
    max-autotune): compiles.autotune_time_s is compile_time_autotune_time_us of the log, and the
    frame's autotuning phase is their sum."""
    bundle = ROOT / "sample_logs" / "gpu-h200-torch2.11" / "mlp_max-autotune_infer_run1.tar.gz"
    if not bundle.exists():
        pytest.skip("sample bundle absent")
    logged = [cm for cm in _compilation_metrics(bundle) if cm.get("co_name")]
    autotune = sum((cm.get("compile_time_autotune_time_us") or 0) / 1e6 for cm in logged)
    assert autotune > 1  # this run autotuned for seconds
    store = open_store(tmp_path / "cw.duckdb")
    assert ingest_paths(store, [bundle]).ok
    with store.read() as con:
        stored = con.execute("SELECT sum(autotune_time_s) FROM compiles").fetchone()[0]
        frames = compile_time.frame_hotspots(con, Filters(**ALL_TIME))
    assert stored == pytest.approx(autotune)
    assert frames["autotune_s"].sum() == pytest.approx(autotune)
    assert (frames["tracing_s"] + frames["aot_s"] + frames["inductor_s"] + frames["autotune_s"]
            <= frames["forward_s"] + 1e-9).all()


def test_compile_time_page_frame_drill_down(app_at, db):
    """?frame= opens the runs that compiled that frame, each linked to its Run detail."""
    with open_store(db).read() as con:
        runs = dict(con.execute("SELECT label, run_id FROM runs").fetchall())
    at = app_at(db, "views/compile_time.py",
                query={"from": "2000-01-01", "to": "2100-01-01", "frame": "forward @ ddp_train.py:31"})
    assert not at.exception and not at.error
    shown = next(d.value for d in at.dataframe if "open" in d.value.columns)
    assert set(shown["run_id"]) == {runs["ranks-same"], runs["ranks-diverge"]}
    diverge = shown.set_index("run_id").loc[runs["ranks-diverge"]]
    assert diverge["recompiles"] == 1 and diverge["open"] == f"run?run={runs['ranks-diverge']}&from=2000-01-01&to=2100-01-01"
    expected = defaultdict(float)
    for b in BUNDLES[:2]:
        for co_name, code, seconds in _compiles_with_cache_misses(b)[1].values():
            if (co_name, code) == ("forward", "ddp_train.py:31"):
                expected[b.name] += seconds
    assert sorted(shown["total_s"]) == pytest.approx(sorted(expected.values()))
    assert (shown["backward_s"] > 0).all() and (shown["total_s"] > shown["forward_s"]).all()
