"""The evidence the review reads before it blames the machine (review/evidence.py), on real runs.

Two real CPU runs of one tiny compiled model through `compilewatch collect`: the baseline as it is,
the candidate with `torch.set_num_threads(1)` in the script. Every graph is the same; only a
setting changed, which is the case a step-time rule must not put down to the machine. Each run
carries its settings (timings.json) and the host probe before and after it (manifest.json); both
are ingested and read back here. The older bundles of sample_logs/ carry neither.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.ingest.bundle import read_manifest
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.evidence import (DEFAULT, MIN_PROBES, PROBE_NOISE_FLOOR, UNSET, ProbeEvidence,
                                          host_probes, probe_speed, run_settings, settings_differ)
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable

JOB = """
import sys
import torch

if "--one-thread" in sys.argv:
    torch.set_num_threads(1)          # a settings change: the graphs stay the same
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
compiled = torch.compile(model)
x = torch.randn(128, 64)
with torch.no_grad():
    for _ in range(12):
        compiled(x)
print("job done")
"""


def _collect(root: Path, name: str, *job_args: str, env_extra: dict | None = None, options=()) -> Path:
    out = root / name
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(REPO), **(env_extra or {})}
    proc = subprocess.run([PY, "-m", "compilewatch", "collect", "--model", "tiny-mlp", "--label", name,
                           "--out", str(out), *options, "--", PY, str(root / "job.py"), *job_args],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    return bundle


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(baseline bundle, candidate bundle, store path, {label: run_id})."""
    root = tmp_path_factory.mktemp("evidence")
    (root / "job.py").write_text(JOB)
    base = _collect(root, "two-threads")
    cand = _collect(root, "one-thread", "--one-thread")
    db = root / "store" / "compilewatch.duckdb"
    report = ingest_paths(open_store(db), [base, cand])
    assert report.ok, [(f.name, f.message) for f in report.files]
    ids = {"base": read_manifest(base).run_id, "cand": read_manifest(cand).run_id}
    return base, cand, db, ids


@pytest.fixture
def con(runs):
    with open_store(runs[2]).read() as c:
        yield c


def _settings(bundle: Path) -> dict:
    return json.loads((bundle / "timings.json").read_text())["settings"]


@pytest.mark.slow
def test_the_bundle_records_the_setting_the_script_changed(runs):
    base, cand, _, _ = runs
    b, c = _settings(base), _settings(cand)
    assert b["torch.get_num_threads()"] == {"value": "2", "source": "torch"}
    assert c["torch.get_num_threads()"] == {"value": "1", "source": "torch"}
    # the environment both ran under, from the allow-list; the collector's own variables are not in it
    assert b["OMP_NUM_THREADS"] == c["OMP_NUM_THREADS"] == {"value": "2", "source": "env"}
    assert not {"TORCH_LOGS", "TORCH_TRACE", "PATH", "HOME"} & set(b)


@pytest.mark.slow
def test_settings_differ_names_the_one_change(runs, con):
    _, _, _, ids = runs
    frame = run_settings(con, ids.values())
    assert set(frame["run_id"]) == set(ids.values())
    assert (frame["source"] == "torch").sum() >= 2 * 20          # every torch switch, both runs
    changes = settings_differ([ids["base"]], [ids["cand"]], frame)
    assert [(c.name, c.source, c.baseline, c.candidate) for c in changes] == [
        ("torch.get_num_threads()", "torch", ("2",), ("1",))]
    assert "2 → 1" in changes[0].sentence()
    # a side that ran under both values explains nothing
    assert settings_differ([ids["base"], ids["cand"]], [ids["cand"]], frame) == []


@pytest.mark.slow
def test_the_probe_is_timed_before_and_after_on_the_same_device(runs):
    for bundle in runs[:2]:
        probe = read_manifest(bundle).extra["host_probe"]
        before, after = probe["before"], probe["after"]
        assert probe["device"] == before["device"] == after["device"] == "cpu"
        for p in (before, after):
            assert p["median_ms"] > 0 and len(p["samples_ms"]) >= 5 and p["process_s"] > 0
            assert p["threads"] == 2          # the job's environment (OMP_NUM_THREADS=2), not its script's setting
        assert before["at"] <= after["at"]
        # the probes are not part of the job's own time
        m = read_manifest(bundle)
        assert before["at"][:19] <= m.started_at[:19] and after["at"][:19] >= m.ended_at[:19]


@pytest.mark.slow
def test_the_probe_is_ingested_into_its_table_and_run_metrics(runs, con):
    _, _, _, ids = runs
    probes = host_probes(con, ids.values())
    assert sorted(probes.groupby("run_id")["phase"].apply(sorted).tolist()) == [["after", "before"]] * 2
    metric = con.execute("SELECT run_id, value, n, unit, direction FROM run_metrics WHERE metric = 'host_probe' "
                         "ORDER BY run_id").fetchall()
    assert len(metric) == 2
    for run_id, value, n, unit, direction in metric:
        mine = probes[probes["run_id"] == run_id]["median_ms"]
        assert value == pytest.approx(mine.median()) and n == 2 and (unit, direction) == ("ms", "lower")


@pytest.mark.slow
def test_probe_speed_reads_the_store_and_says_how_sure_it_is(runs, con):
    _, _, _, ids = runs
    ev = probe_speed(con, [ids["base"]], [ids["cand"]])
    assert isinstance(ev, ProbeEvidence) and ev.device == "cpu"
    assert len(ev.baseline_ms) == len(ev.candidate_ms) == MIN_PROBES
    assert ev.ratio == pytest.approx(ev.candidate_median_ms / ev.baseline_median_ms)
    assert ev.noise >= PROBE_NOISE_FLOOR
    # exactly one of the two readings when both sides have their probes
    assert ev.conclusive != ev.steady
    assert ev.conclusive == (abs(ev.ratio - 1) > ev.noise)
    # the same reading from the frame as from the connection
    assert probe_speed(host_probes(con, ids.values()), [ids["base"]], [ids["cand"]]) == ev


def test_probe_speed_on_values_given_directly():
    steady = probe_speed({"a": [10.0, 10.2], "b": [10.1, 9.9]}, ["a"], ["b"])
    assert steady.steady and not steady.conclusive and "same speed" in steady.why
    slower = probe_speed({"a": [10.0, 10.2], "b": [14.0, 14.3]}, ["a"], ["b"])
    assert slower.conclusive and slower.host_slower and slower.ratio == pytest.approx(14.15 / 10.1)
    # the noise is the sides' own spread: a baseline whose probes moved 50% cannot see a 40% change
    noisy = probe_speed({"a": [8.0, 12.0], "b": [13.5, 13.5]}, ["a"], ["b"])
    assert not noisy.conclusive and noisy.steady and noisy.noise == pytest.approx(0.4)
    one_side = probe_speed({"a": [10.0, 10.1]}, ["a"], ["b"])
    assert not one_side.conclusive and not one_side.steady and one_side.ratio is None
    assert probe_speed({}, ["a"], ["b"]) is None


def test_settings_differ_reads_a_missing_name_by_its_source():
    import pandas as pd

    rows = [("a", 0, "torch.get_num_threads()", "8", "torch"),
            ("a", 0, "torch._inductor.config.max_autotune", "True", "inductor_config"),
            ("b", 0, "torch.get_num_threads()", "8", "torch"),
            ("b", 0, "NCCL_ALGO", "Ring", "env"),
            ("b", 0, "torch.backends.cudnn.fp32_precision", "tf32", "torch")]
    frame = pd.DataFrame(rows, columns=["run_id", "rank", "name", "value", "source"])
    changes = {c.name: c for c in settings_differ(["a"], ["b"], frame)}
    # a config entry missing on a run that recorded settings is at its default; an env variable, unset
    assert changes["torch._inductor.config.max_autotune"].candidate == (DEFAULT,)
    assert changes["NCCL_ALGO"].baseline == (UNSET,)
    # a torch switch the other side's torch could not report says nothing
    assert "torch.backends.cudnn.fp32_precision" not in changes and "torch.get_num_threads()" not in changes
    # a run that recorded no settings at all (an older bundle) leaves its side with nothing to say
    assert settings_differ(["a"], ["old"], frame) == []


def test_older_bundles_ingest_with_no_settings_or_probe(samples_db):
    with open_store(samples_db).read() as con:
        runs = [r for (r,) in con.execute("SELECT run_id FROM runs").fetchall()]
        assert runs
        assert con.execute("SELECT count(*) FROM run_settings").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM host_probes").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM run_metrics WHERE metric = 'host_probe'").fetchone()[0] == 0
        assert run_settings(con, runs).empty
        assert probe_speed(con, runs[:1], runs[1:]) is None
        assert settings_differ(runs[:1], runs[1:], run_settings(con, runs)) == []


FIXTURES = REPO / "tests" / "fixtures" / "evidence"
V1, V2 = "settings-job-20261128T062242Z-0b2896", "settings-job-20261128T062502Z-137c1b"


def _evidence(store) -> tuple:
    assert ingest_paths(store, [FIXTURES / f"{V1}.tar.gz", FIXTURES / f"{V2}.tar.gz"]).ok
    with store.read() as con:
        ids = dict(con.execute("SELECT label, run_id FROM runs").fetchall())
        frame = run_settings(con, ids.values())
        changes = settings_differ([ids["v1-tf32"]], [ids["v2-highest"]], frame)
        probe = probe_speed(con, [ids["v1-tf32"]], [ids["v2-highest"]])
        metric = con.execute("SELECT count(*) FROM run_metrics WHERE metric = 'host_probe'").fetchone()[0]
    return frame.sort_values(["run_id", "name"]).reset_index(drop=True), changes, probe, metric


def test_a_matmul_precision_change_is_named_on_both_stores(tmp_path, lake_store):
    """The same two real bundles, read back from the embedded store and from DuckLake."""
    embedded = _evidence(open_store(tmp_path / "cw.duckdb"))
    frame, changes, probe, metric = embedded
    assert [c.name for c in changes] == ["torch.backends.cuda.matmul.allow_tf32",
                                         "torch.backends.cuda.matmul.fp32_precision",
                                         "torch.get_float32_matmul_precision()"]
    assert changes[-1].baseline == ("high",) and changes[-1].candidate == ("highest",)
    assert sorted(probe.baseline_ms) == [166.8281, 190.5833] and sorted(probe.candidate_ms) == [114.4419, 127.964]
    assert metric == 2
    lake = _evidence(lake_store)
    assert lake[0].equals(frame) and lake[1:] == embedded[1:]
