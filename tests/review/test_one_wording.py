"""One verdict, one wording: the same store through `compilewatch check`, the Markdown report and the
Overview gives every verdict the same words for what changed and by how much - a graph break that
went away included ("gone" everywhere). Real CPU runs of tests/fixtures/review/: the breaks version
as the baseline and the clean version as the candidate, so the breaks are fixed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import review as overview
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review import report, wording
from compilewatch.review.baseline import parse_spec
from compilewatch.review.gate import assemble
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "review"


@pytest.fixture(scope="module")
def fixed_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("wording") / "cw.duckdb"
    paths = sorted((FIX / "breaks").glob("*.tar.gz")) + sorted((FIX / "clean").glob("*.tar.gz"))
    assert ingest_paths(open_store(db), paths).ok
    return db


def test_check_report_and_overview_word_every_verdict_alike(fixed_db, monkeypatch):
    # The Overview takes its sides from the settings' pinned baseline; check and report from SPECs.
    monkeypatch.setenv("COMPILEWATCH_REVIEW_BASELINE", "label=breaks")
    with open_store(fixed_db).read() as con:
        r = assemble(con, parse_spec("label=breaks"), parse_spec("label=clean"))
        judged = r.regressions + r.suspicious + r.improvements
        assert any(v.kind == "fixed_graph_break" for v in judged), [v.kind or v.metric for v in judged]
        md = report.to_markdown(r)
        rows = overview.verdicts(con, Filters(labels=("clean", "breaks")))
    cli = subprocess.run([sys.executable, "-m", "compilewatch", "check", "--db", str(fixed_db),
                          "--baseline", "label=breaks", "--candidate", "label=clean"],
                         capture_output=True, text=True, timeout=300)
    cli_json = subprocess.run([*cli.args, "--json"], capture_output=True, text=True, timeout=300)
    items = [x for k in ("regressions", "suspicious", "improvements") for x in json.loads(cli_json.stdout)[k]]
    rows = rows[rows["status"].isin(["regression", "suspicious", "improvement"])]
    assert len(rows) == len(judged) == len(items)
    for v in judged:
        title, change = wording.title(v), wording.change(v)
        assert f"{title} ({change})" in cli.stdout, (title, change)
        assert f"{report._md_cell(title)}** ({change})" in md, (title, change)
        row = rows[(rows["metric"] == wording.what(v)) & (rows["model"] == v.model) & (rows["hardware"] == v.hardware)
                   & (rows["summary"] == v.summary)]
        assert len(row) == 1 and row["change"].iloc[0] == change, (title, change)
        assert any(x["what"] == wording.what(v) and x["change_text"] == change for x in items)
    gone = [v for v in judged if v.kind == "fixed_graph_break"]
    assert all(wording.change(v) == "gone" for v in gone)
    assert not any(row["change"] == "new" for _, row in rows[rows["metric"] == "Graph break gone"].iterrows())
