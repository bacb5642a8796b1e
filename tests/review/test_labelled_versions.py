"""Versions without a SPEC: runs told apart only by the label their user gave them
(`compilewatch collect --label v2`, no git repository), real CPU runs in
tests/fixtures/review/labelled/ (its README says how they were made). With no baseline runs in the
window, the newest label of each model is judged against the label before it by time - in the
default `report`, in `check` with no SPEC and on the Overview - and two labels of identical code
flag nothing."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import review as overview
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review import report
from compilewatch.review.weekly import review
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
LABELLED = REPO / "tests" / "fixtures" / "review" / "labelled"


@pytest.fixture(scope="module")
def labelled_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("labelled") / "cw.duckdb"
    rep = ingest_paths(open_store(path), sorted(LABELLED.glob("*.tar.gz")))
    assert rep.ok
    with open_store(path).read() as con:
        # what makes this fixture what it is: labels, and no commit to tell versions apart
        assert con.execute("SELECT count(*), count(git_commit), count(DISTINCT label) FROM runs").fetchall() == [(12, 0, 4)]
    return path


def _worse(r, model):
    return {(v.kind or v.metric) for v in r.regressions if v.model == model}


def test_the_newest_label_is_judged_against_the_previous_one(labelled_db):
    with open_store(labelled_db).read() as con:
        r = review(con)
    assert len(r.baseline_runs) == 0        # nothing in the week before: the labels are the history
    worse = _worse(r, "labelled-job")
    assert {"compile_time", "graph_breaks", "recompiles", "new_graph_break", "new_recompiling_function"} <= worse
    brk = next(v for v in r.regressions if v.kind == "new_graph_break")
    assert "Tensor.item()" in brk.summary and "train_x.py:55" in brk.summary
    assert _worse(r, "labelled-same") == set() and not [v for v in r.suspicious if v.model == "labelled-same"]
    notes = {n.model: n.text for n in r.notes if n.kind == "own_history"}
    assert "label v2" in notes["labelled-job"] and "label v1" in notes["labelled-job"]
    assert "told apart by label" in notes["labelled-job"]
    assert "label b" in notes["labelled-same"] and "label a" in notes["labelled-same"]


def test_check_with_no_spec_fails_on_the_regression_alone(labelled_db, tmp_path):
    run = [sys.executable, "-m", "compilewatch", "check", "--db", str(labelled_db), "--json"]
    p = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert {x["model"] for x in out["regressions"]} == {"labelled-job"}
    # identical code under two labels passes the gate
    same = tmp_path / "same.duckdb"
    assert ingest_paths(open_store(same), sorted(LABELLED.glob("labelled-same_*.tar.gz"))).ok
    p = subprocess.run([*run[:4], "--db", str(same)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "own history: labelled-same" in p.stdout, p.stdout + p.stderr
    # the text output says which runs were the baseline before its first verdict: the header's week
    # before holds none
    p = subprocess.run([*run[:4], "--db", str(labelled_db)], capture_output=True, text=True, timeout=300)
    lines = p.stdout.splitlines()
    assert "(0 runs)" in lines[0], p.stdout
    first_verdict = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("REGRESSION"))
    assert any(ln.startswith("  own history: labelled-job") for ln in lines[1:first_verdict]), p.stdout


def test_the_default_report_names_it(labelled_db):
    with open_store(labelled_db).read() as con:
        md = report.to_markdown(review(con))
    worse = md.split("## Got worse")[1].split("## Got better")[0]
    assert "labelled-job" in worse and "labelled-same" not in worse
    assert "train_x.py:55" in worse and "Tensor.item()" in worse
    assert "told apart by label" in md


def test_the_overview_names_it(labelled_db):
    with open_store(labelled_db).read() as con:
        newest = con.execute("SELECT max(started_at) FROM runs").fetchall()[0][0].date()
        rows = overview.verdicts(con, Filters(start=newest - timedelta(days=6), end=newest))
    reg = rows[rows["status"] == "regression"]
    assert set(reg["model"]) == {"labelled-job"}
    assert "New graph break" in set(reg["metric"])
    assert reg["headline"].str.contains("labelled-job on CPU").all() and reg["headline"].str.contains("train_x.py:55").all()
    assert set(rows.loc[rows["status"] == "own_history", "model"]) == {"labelled-job", "labelled-same"}
