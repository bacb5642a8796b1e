"""The review on sample_logs/: hardware is never mixed, unchanged jobs give no verdict, SPECs select
what they say. Real bundles: H200 with torch 2.11, a shared 2-vCPU machine with 2.13 and 2.14.1."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.core.errors import SpecError
from compilewatch.review.baseline import parse_spec
from compilewatch.review.regressions import IMPROVEMENT, REGRESSION, SUSPICIOUS
from compilewatch.review.weekly import review

REPO = Path(__file__).resolve().parents[2]


def _hardware_of(con) -> dict[str, str]:
    from compilewatch.review import series
    runs = series.select_runs(con, "TRUE", [])
    return dict(zip(runs["run_id"], runs["hardware"]))


def test_hardware_comes_from_the_manifest(samples_con):
    hw = set(_hardware_of(samples_con).values())
    assert {"NVIDIA H200 ×1", "CPU ×1"} <= hw, hw


@pytest.mark.parametrize("base, cand", [("torch=2.11", "torch=2.13"), ("torch=2.13", "torch=2.14"),
                                        ("torch=2.14", "torch=2.11"), ("torch=2.11", "torch=2.14.1")])
def test_no_verdict_mixes_hardware(samples_con, base, cand):
    r = review(samples_con, parse_spec(base), parse_spec(cand))
    hw = _hardware_of(samples_con)
    assert r.verdicts or r.notes
    for v in r.verdicts:
        sides = (v.baseline.run_ids if v.baseline else []) + (v.candidate.run_ids if v.candidate else [])
        assert {hw[i] for i in sides} == {v.hardware}, (v.summary, sides)
    for cp in r.changepoints:
        assert {hw[x.run_id] for x in cp.before.runs + cp.after.runs} == {cp.hardware}
    if "2.11" in base + cand and ("2.13" in base + cand or "2.14" in base + cand):
        # the H200 runs and the CPU runs share models but never a verdict: each is "not compared"
        assert not r.verdicts
        assert r.notes and all(n.kind in ("different_hardware", "no_baseline") for n in r.notes)
        assert any("H200" in n.text and "CPU" in n.text for n in r.notes)


def test_cpu_torch_versions_compare_on_the_same_hardware(samples_con):
    r = review(samples_con, parse_spec("torch=2.13"), parse_spec("torch=2.14"))
    judged = {(v.model, v.metric) for v in r.verdicts}
    assert ("item_branch", "graph_breaks") in judged and ("varying_batch", "recompiles") in judged
    assert {v.hardware for v in r.verdicts} == {"CPU ×1"}
    # one run per model and side: timings cannot be judged, counts can (they are exact)
    timing = [v for v in r.verdicts if v.metric in ("speedup", "step_time", "compile_time")]
    assert timing and all(v.status == "insufficient_data" for v in timing)


# Repeated runs of one unchanged job on the H200 (same command, same torch): every split of them
# into baseline and candidate, in both orders, must give no regression, suspicious or improvement.
UNCHANGED = [("resnet50", "default/train"), ("resnet18", "default/train"), ("vit_tiny", "default/train")]


@pytest.mark.parametrize("model, label", UNCHANGED)
def test_unchanged_job_gives_no_verdict_in_any_split(samples_con, model, label):
    from compilewatch.review import series
    runs = series.select_runs(samples_con, "rv.model = ? AND rv.label = ?", [model, label])
    ids = list(runs["run_id"])
    assert len(ids) >= 3
    tried = cold_seen = 0
    for k in range(1, len(ids)):
        for cand in itertools.combinations(ids, k):
            base = [i for i in ids if i not in cand]
            r = review(samples_con, parse_spec(",".join(f"run={i}" for i in base)),
                       parse_spec(",".join(f"run={i}" for i in cand)), with_changepoints=False)
            loud = [v for v in r.verdicts if v.status in (REGRESSION, SUSPICIOUS, IMPROVEMENT)]
            # resnet50's first run compiled with a cold inductor cache (21 s against 2.8 s warm): that
            # may be said, as suspicious with the cache as its evidence, never as a regression
            cold = [v for v in loud if v.status == SUSPICIOUS and v.metric == "compile_time"
                    and any(e.kind == "cache" and "cold cache" in e.text for e in v.evidence)]
            assert [v.summary for v in loud if v not in cold] == [], (base, cand)
            tried += 1
            cold_seen += len(cold)
    assert tried >= 6
    if model == "resnet50":
        assert cold_seen, "the cold-cache run should be named when it is the candidate"


def test_spec_errors():
    with pytest.raises(SpecError):
        parse_spec("tor=2.13")
    with pytest.raises(SpecError):
        parse_spec("label")
    s = parse_spec(["label=v1", "label=v2,model=llama"])
    assert s.values("label") == ("v1", "v2") and s.values("model") == ("llama",)


def test_check_cli_exit_status_and_json(samples_db):
    def check(*args):
        return subprocess.run([sys.executable, "-m", "compilewatch", "check", "--db", str(samples_db), *args],
                              capture_output=True, text=True, cwd=REPO)
    ok = check("--baseline", "torch=2.13", "--candidate", "torch=2.14", "--json")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["regressions"] == [] and out["status"] == "passed" and out["candidate_runs"] == 7
    bad = check("--baseline", "torch=9.99", "--candidate", "torch=2.14")
    assert bad.returncode == 2 and "matches no run" in bad.stderr
    bad = check("--baseline", "flavour=x", "--candidate", "torch=2.14")
    assert bad.returncode == 2 and "unknown SPEC key" in bad.stderr
    missing = check("--baseline", "torch=2.13", str(REPO / "no-such-bundle.tar.gz"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
