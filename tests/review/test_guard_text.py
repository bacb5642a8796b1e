"""Failed guards as a person reads them: the expression alone, its source line and its whole
`file:line in function` as separate fields, nothing cut at a fixed width - on the real GPU team
job of sample_logs/ (llama-pretrain v2-breaks recompiles lm_loss_warmup on a Python float)."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.ingest.formats.guard_text import full_path, split_guard
from compilewatch.ingest.loader import ingest_paths
from compilewatch.review import report
from compilewatch.review.baseline import parse_spec
from compilewatch.review.weekly import review
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def team_job(tmp_path_factory):
    paths = sorted((REPO / "sample_logs" / "gpu-h100-torch2.11").glob("llama-pretrain_*.tar.gz"))
    db = tmp_path_factory.mktemp("guards") / "cw.duckdb"
    assert ingest_paths(open_store(db), paths).ok
    with open_store(db).read() as con:
        yield con


def test_every_stored_guard_splits_into_expression_and_location(team_job):
    raws = [r[0] for r in team_job.execute("SELECT DISTINCT raw FROM guard_failures").fetchall()]
    assert raws
    for raw in raws:
        g = split_guard(raw)
        assert g.expression and "  " not in g.expression and "#" not in g.expression, raw
        if g.file:   # torch printed a location: line and function come with it
            assert g.line and g.function, raw


def test_recompile_evidence_reads_whole(team_job):
    r = review(team_job, parse_spec("label=v1-clean"), parse_spec("label=v2-breaks"))
    ev = [e for v in r.regressions if v.kind == "new_recompiling_function" for e in v.evidence
          if e.kind == "recompile" and e.fields["function"] == "lm_loss_warmup"]
    assert ev, [v.summary for v in r.regressions]
    f = ev[0].fields
    assert f["guard"] == "warmup == 0.02"
    # torch printed the path shortened ("mp/team/train_llama.py"); the recompile recorded it whole
    assert f["guard_at"] == "/tmp/team/train_llama.py:171 in lm_loss_warmup"
    assert f["guard_source"].startswith("return ce + warmup * 1e-4") and f["guard_source"].endswith(".mean()")
    assert "  " not in ev[0].text and "# " not in ev[0].text
    storm = r.storms[r.storms["function"] == "lm_loss_warmup"].iloc[0]
    assert (storm["guard"], storm["guard_at"]) == (f["guard"], f["guard_at"])
    md = report.to_markdown(r)
    assert "/tmp/team/train_llama.py:171 in lm_loss_warmup" in md and "warmup == 0.02" in md
    assert "ork/" not in md and "# return" not in md


def test_full_path_keeps_what_it_cannot_match():
    assert full_path("mp/team/train_llama.py", ["/tmp/team/train_llama.py"]) == "/tmp/team/train_llama.py"
    assert full_path("mp/team/train_llama.py", ["/elsewhere/other.py", None]) == "mp/team/train_llama.py"
    assert full_path(None, ["/x.py"]) is None
