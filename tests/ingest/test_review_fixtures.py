"""The real CPU regression runs in tests/fixtures/review/ (README.md there says how they were made)
read back as the review needs them: every version's runs on one hardware key, each with its own git
commit, and each "harmless" change visible in the metrics it should move and not in the others."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "review"
LABELS = ("clean", "clean_rerun", "breaks", "slow_step")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("review") / "cw.duckdb")
    report = ingest_paths(s, [FIXTURES / label for label in LABELS])
    assert report.ok and report.errors == 0, [(f.name, f.message) for f in report.files if f.status != "stored"]
    return s


def _by_label(store, metric, subject=""):
    with store.read() as con:
        rows = con.execute("SELECT r.label, m.value FROM run_metrics m JOIN runs r USING (run_id) "
                           "WHERE m.metric = ? AND m.subject = ? ORDER BY r.started_at", [metric, subject]).fetchall()
    out = {label: [] for label in LABELS}
    for label, value in rows:
        out[label].append(value)
    return out


def test_runs_labels_commits_and_one_hardware(store):
    with store.read() as con:
        rows = con.execute("SELECT label, count(*), count(DISTINCT git_commit), any_value(git_commit), "
                           "count(DISTINCT hardware), any_value(hardware), any_value(torch_version) "
                           "FROM runs GROUP BY label").fetchall()
    info = {r[0]: r[1:] for r in rows}
    assert set(info) == set(LABELS)
    assert all(n == 3 and commits == 1 and hw == 1 for n, commits, _, hw, _, _ in info.values())
    assert len({c for _, _, c, _, _, _ in info.values()}) == 4           # one commit per version
    assert {h for *_, h, _ in info.values()} == {next(iter(info.values()))[4]}
    assert next(iter(info.values()))[4].startswith("CPU (") and next(iter(info.values()))[5].startswith("2.13")


def test_breaks_adds_a_graph_break_and_recompiles_and_nothing_else_does(store):
    for metric, changed in (("graph_breaks", 1), ("distinct_graph_breaks", 1), ("recompiles", 3)):
        values = _by_label(store, metric)
        assert values["breaks"] == [changed] * 3, metric
        assert values["clean"] == values["clean_rerun"] == values["slow_step"] == [0] * 3, metric
    with store.read() as con:
        keys = con.execute("SELECT DISTINCT break_key, user_function, user_line FROM graph_breaks").fetchall()
        raw = con.execute("SELECT any_value(reason) FROM graph_breaks").fetchone()[0]
        fns = {r[0] for r in con.execute("SELECT DISTINCT function FROM recompiles").fetchall()}
    # one break, the same in every run: the .item() check in forward's loop over the blocks
    assert len(keys) == 1 and keys[0][1] == "forward" and keys[0][2] > 0 and "Tensor.item()" in raw
    assert fns == {"forward", "lm_loss"}


def _graphs(store, label):
    with store.read() as con:
        return sorted(con.execute(
            "SELECT c.co_name, c.frame_compile_id, c.graph_op_count, c.guard_count FROM compiles c JOIN runs r USING (run_id) "
            "WHERE r.label = ? AND r.run_id = (SELECT min(run_id) FROM runs WHERE label = ?)", [label, label]).fetchall(),
            key=repr)


def test_slow_step_compiles_the_same_graphs_and_only_the_iteration_period_sees_it(store):
    assert _graphs(store, "slow_step") == _graphs(store, "clean") == _graphs(store, "clean_rerun")
    it = _by_label(store, "iteration_time")
    clean = statistics.median(it["clean"] + it["clean_rerun"])
    slow = statistics.median(it["slow_step"])
    assert slow >= 1.4 * clean, (it["slow_step"], it["clean"], it["clean_rerun"])
    assert min(it["slow_step"]) > max(it["clean"] + it["clean_rerun"])
    # the compiled forward's own time does not see host work outside it
    fwd = _by_label(store, "step_time", "TinyLM.forward")
    assert statistics.median(fwd["slow_step"]) < 1.25 * statistics.median(fwd["clean"] + fwd["clean_rerun"])


def test_every_run_has_the_iteration_period_from_optimizer_steps(store):
    with store.read() as con:
        rows = con.execute("SELECT iteration_source, iteration_clock, count(*) FROM timing_summaries GROUP BY ALL").fetchall()
        n = con.execute("SELECT count(DISTINCT run_id) FROM run_metrics WHERE metric = 'iteration_time' AND n >= 40").fetchone()[0]
    assert rows == [("optimizer_step", "host", 12)] and n == 12
