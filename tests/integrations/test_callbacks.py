"""Each trainer's CompileWatchCallback in a real run of that trainer (from PyPI) on the CPU: jobs/
lightning_job.py (a LightningModule holding a compiled module, 8 optimizer steps of 2 batches)
and jobs/transformers_job.py (a one-layer GPT-2 from a config, compiled by the Trainer, 6 optimizer
steps of 2 batches). Per trainer: v1 and v2 through the callback, v1 wrapped by `compilewatch
collect` with the callback off; the three ingested into one store."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from tests.integrations.trainer_runs import assert_reads_like_wrapped, bundles, check, run_job, trainer_runs

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Trainer:
    script: str
    model: str            # what the callback reads from the trainer
    steps: int            # the trainer's optimizer steps
    collector: str
    trainer: str
    packages: tuple


TRAINERS = {
    "lightning": Trainer("lightning_job.py", "TinyRegressor", 8, "compilewatch lightning callback",
                         "pytorch_lightning.Trainer", ("pytorch_lightning",)),
    "transformers": Trainer("transformers_job.py", "gpt2", 6, "compilewatch transformers callback",
                            "transformers.Trainer", ("transformers", "accelerate")),
}


@pytest.fixture(scope="module", params=sorted(TRAINERS))
def runs(request, tmp_path_factory):
    t = TRAINERS[request.param]
    missing = [p for p in t.packages if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/setup.sh --dev installs them)")
    return t, trainer_runs(tmp_path_factory, t.script, t.model)


def test_the_callback_writes_the_bundle_from_what_the_trainer_says(runs):
    t, r = runs
    m = json.loads((r["v1"] / "manifest.json").read_text())
    assert (m["model"], m["label"], m["end_reason"], m["exit_status"]) == (t.model, "v1", "exited", 0)
    assert m["collector"].startswith(t.collector) and m["trainer"] == t.trainer
    assert set(m["files"]) >= {"torch_logs", "torch_trace", "timings"}
    callables = json.loads((r["v1"] / "timings.json").read_text())["callables"]
    (iteration,) = [c for c in callables if c["mode"] == "iteration"]
    assert (iteration["calls"], iteration["source"]) == (t.steps, "trainer_step")
    if t.script == "lightning_job.py":
        # the module compiled before fit is timed: two batches per step
        (compiled,) = [c for c in callables if c["mode"] == "compiled"]
        assert (compiled["name"], compiled["calls"]) == ("Net.forward", 2 * t.steps)


def test_without_the_callback_nothing_is_written(runs):
    _, r = runs
    assert bundles(r["callback_off"]) == []


def test_it_ingests_and_reads_as_the_wrapped_run(runs):
    t, r = runs
    assert_reads_like_wrapped(r, t.steps)


def test_the_review_judges_the_two_versions(runs):
    t, r = runs
    p = check(r["db"], t.model)
    assert p.returncode == 1, p.stdout + p.stderr
    worse = {x["metric"] for x in json.loads(p.stdout)["regressions"] if x["model"] == t.model}
    assert "graph_breaks" in worse


def test_on_two_lightning_ranks_one_bundle_holds_both(tmp_path):
    if importlib.util.find_spec("pytorch_lightning") is None:
        pytest.skip("pytorch_lightning not installed (scripts/setup.sh --dev installs it)")
    run_job("lightning_job.py", "v1", tmp_path / "out", "--devices", "2")   # DDP on gloo, 2 processes
    (bundle,) = bundles(tmp_path / "out")
    m = json.loads((bundle / "manifest.json").read_text())
    assert m["files"]["timings_ranks"] == ["timings.rank1.json"] and m["world_size"] == 2
    traces = m["files"]["torch_trace"]
    assert len(traces) == 2 and {"rank_0_", "rank_1_"} == {t.split("trace_")[1][:7] for t in traces}
    for rank, name in enumerate(("timings.json", "timings.rank1.json")):
        timings = json.loads((bundle / name).read_text())
        assert (timings["rank"], timings["world_size"]) == (rank, 2)
        (iteration,) = [c for c in timings["callables"] if c["mode"] == "iteration"]
        assert (iteration["calls"], iteration["source"]) == (TRAINERS["lightning"].steps, "trainer_step")
    db = tmp_path / "cw.duckdb"
    assert ingest_paths(open_store(db), [bundle]).ok
    with open_store(db).read() as con:
        ranks = con.execute("SELECT DISTINCT rank FROM compiles ORDER BY rank").fetchall()
    assert ranks == [(0,), (1,)]
