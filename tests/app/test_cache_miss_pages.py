"""Why the compile cache missed, on Run detail's CUDA graphs & caches tab and on Compare, for real CPU
runs made with `compilewatch collect` (tests/fixtures/cache_miss): the job again with one Inductor
setting changed misses where the plain rerun before it hit; both pages name the setting, with the
sentences `compilewatch diff --json` prints for the same runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "tests" / "fixtures" / "cache_miss").glob("cmjob-2026*.tar.gz"))


@pytest.fixture(scope="module")
def cache_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("cache-miss-pages") / "cw.duckdb"
    assert ingest_paths(open_store(db), BUNDLES).ok
    return db


def _runs(db) -> list[str]:
    with open_store(db).read() as con:
        return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]


def _diff_sentences(db, a: str, b: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "compilewatch", "diff", a, b, "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return [m["sentence"] for m in json.loads(r.stdout)["cache_misses"]]


def _misses_table(at):
    (d,) = [d.value for d in at.dataframe if "why" in d.value.columns and "parts" in d.value.columns]
    return d


def test_run_detail_says_which_setting_the_cache_missed_on(app_at, cache_db):
    cold, warm, config, _ = _runs(cache_db)
    at = app_at(cache_db, "views/run_detail.py", query={"run": config})
    assert not at.exception, [e.value for e in at.exception]
    d = _misses_table(at)
    assert set(d["parts"]) == {"config"} and len(d) == 3
    fwd = d[d["graph"] == "forward"].iloc[0]
    assert fwd["outcome"] == "hit → miss" and fwd["changes"] == "inductor_config[size_asserts]: True → False"
    assert list(d["why"]) == _diff_sentences(cache_db, warm, config)     # against the run before: the rerun
    assert any(f"Against run {warm}" in c.value for c in at.caption)
    keys = [x.value for x in at.dataframe if "cache_key" in x.value.columns][0]
    assert sorted(keys["graph"]) == ["backward", "forward", "–"] and (keys["components"] > 600).sum() == 2


def test_run_detail_of_the_rerun_blames_nothing(app_at, cache_db):
    _, warm, _, _ = _runs(cache_db)
    at = app_at(cache_db, "views/run_detail.py", query={"run": warm})
    assert not at.exception
    assert not [d for d in at.dataframe if "why" in d.value.columns]
    assert "No lookup missed here where the run before hit." in [c.value for c in at.caption]


def test_compare_names_the_part_of_the_key_that_differed(app_at, cache_db):
    _, warm, config, batch = _runs(cache_db)
    at = app_at(cache_db, "views/compare.py", query={"run": warm, "run_b": batch})
    assert not at.exception, [e.value for e in at.exception]
    d = _misses_table(at)
    back = d[d["graph"] == "backward"].iloc[0]
    assert back["parts"] == "inputs" and "shape=torch.Size([8, 16]) → shape=torch.Size([12, 16])" in back["changes"]
    assert list(d["why"]) == _diff_sentences(cache_db, warm, batch)
