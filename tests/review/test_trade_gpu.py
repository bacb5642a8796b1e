"""The trade on a GPU: sample_logs/gpu-h200-torch2.11-trade/, real runs of
tests/fixtures/graphs/blocks_job.py on one H200 (sample_logs/scripts/trade/run_gpu.sh), v1 and v3
(every block under activation checkpointing) alternated, three of each. The slower iteration is a
regression whose cause names the checkpoint's graphs and, in the same sentence, the memory it saved,
by the figures the store holds for those runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.review.baseline import parse_spec
from compilewatch.review.regressions import IMPROVEMENT, REGRESSION
from compilewatch.review.weekly import review
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
TRADE = REPO / "sample_logs" / "gpu-h200-torch2.11-trade"


@pytest.fixture(scope="module")
def trade_db(tmp_path_factory) -> Path:
    paths = sorted(TRADE.glob("*.tar.gz"))
    assert len(paths) == 6
    db = tmp_path_factory.mktemp("trade") / "cw.duckdb"
    assert ingest_paths(open_store(db), paths).ok
    return db


def test_checkpointing_on_a_gpu_is_slower_and_lighter_in_one_sentence(trade_db):
    with open_store(trade_db).read() as con:
        peak = dict(con.execute("""SELECT r.label, median(m.value) FROM run_metrics m JOIN runs r USING (run_id)
                                   WHERE m.metric = 'peak_memory' GROUP BY r.label""").fetchall())
        r = review(con, parse_spec("label=v1"), parse_spec("label=v3"))
    saved = peak["v3"] / peak["v1"] - 1
    assert saved < -0.1, peak           # CUDA's max_memory_allocated: the activations v3 no longer keeps
    (lighter,) = [v for v in r.verdicts if v.metric == "peak_memory"]
    assert lighter.status == IMPROVEMENT and round(100 * lighter.change) == round(100 * saved)
    (slower,) = [v for v in r.verdicts if v.metric == "iteration_time"]
    assert slower.status == REGRESSION and slower.change > 0.1, slower.summary
    text = slower.cause.text
    assert "+2 tag_activation_checkpoint" in text, text
    assert text.endswith(f"the trade: peak memory {100 * saved:+.0f}% in the same runs"), text
    # the same cause where CI reads it
    p = subprocess.run([sys.executable, "-m", "compilewatch", "check", "--db", str(trade_db), "--baseline", "label=v1",
                        "--candidate", "label=v3", "--json"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 1, p.stderr
    (gated,) = [v for v in json.loads(p.stdout)["regressions"] if v["metric"] == "iteration_time"]
    assert gated["cause"]["text"] == text
    assert {part["kind"] for part in gated["cause"]["parts"]} >= {"graphs", "trade"}
