"""The Compile time page's runtime linkage read from its day and month level (store/sketch.py bins)
agrees with the same view read from every run's figures: the counts exactly, the medians within the
sketch's relative error; and the view picks the level only where a window holds a whole month.

Data: the timing hooks' files (timings.json, and bench.csv where the bundle has one) of every CPU,
H100 and H200 bundle in sample_logs/, each bundle's files ingested loose as one run of its model and
torch version, plus the two multi-rank DDP bundles of tests/fixtures/ranks/ whole. All the bundles
were collected within three days; a loose log is dated by its file's time (ingest/commit.py), so
each run's files are given a day of 2026 first, spreading the runs over eleven months, the same
callable in several of them, as a team's year is.
"""
from __future__ import annotations

import json
import math
import os
import tarfile
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import compile_time
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, sketch

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = [p for d in ("cpu-torch2.13", "cpu-torch2.14.1", "gpu-h100-torch2.11", "gpu-h200-torch2.11")
           for p in sorted((ROOT / "sample_logs" / d).glob("*.tar.gz"))]
RANKS = sorted((ROOT / "tests" / "fixtures" / "ranks").glob("*.tar.gz"))
KEYS = ["model", "callable", "mode", "torch_version"]
COUNTS = ["runs", "calls", "compile_steps"]


def _day(i: int) -> date:
    """Run i's day: every 29th day of 2026 from 7 January, wrapping within 2 January .. 27 November."""
    return date(2026, 1, 2) + timedelta(days=(5 + 29 * i) % 330)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("linkage")
    store = open_store(folder / "store" / "cw.duckdb")
    with store.writes_held():   # one writer across the runs, their cells summed once at the end
        for i, bundle in enumerate(SAMPLES):
            _ingest_loose(store, folder / f"run{i}", bundle, i)
    assert ingest_paths(store, RANKS).ok
    return folder / "store" / "cw.duckdb"


def _ingest_loose(store, folder: Path, bundle: Path, i: int) -> None:
    """The bundle's timing hooks' files, ingested loose as run i of its model and torch version, on _day(i)."""
    with tarfile.open(bundle) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        if "timings.json" not in members:
            return
        manifest = json.loads(tar.extractfile(members["manifest.json"]).read())
        folder.mkdir()
        files = [folder / name for name in ("timings.json", "bench.csv") if name in members]
        for path in files:
            path.write_bytes(tar.extractfile(members[path.name]).read())
    when = datetime.combine(_day(i), time(12), timezone.utc).timestamp()
    for path in files:
        os.utime(path, (when, when))
    report = ingest_paths(store, files, run_id=f"linkage-{i}", model=manifest["model"],
                          torch_version=manifest["torch_version"], label="nightly" if i % 3 == 0 else None)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]


# whole months only; whole months and the partial months' days on both sides; a model filter over
# the year; a torch version and hardware filter; and every run
VIEWS = {
    "year": Filters(start=date(2026, 1, 1), end=date(2026, 12, 31), limit=500),
    "partial months": Filters(start=date(2026, 2, 14), end=date(2026, 9, 20), limit=500),
    "models, year": Filters(models=("llama-finetune", "resnet50", "ddp_mlp"), start=date(2026, 1, 1),
                            end=date(2026, 12, 31), limit=500),
    "torch and hardware, partial months": Filters(torch_versions=("2.11.0+cu130",), hardware=("NVIDIA H200 ×1",),
                                                  start=date(2026, 3, 9), end=date(2026, 11, 30), limit=500),
    "all time": Filters(limit=500),
}
# windows the view reads exactly: no whole month, and a label (a month cell keeps none)
EXACT_VIEWS = {
    "three weeks": Filters(start=date(2026, 3, 5), end=date(2026, 3, 25), limit=500),
    "label, year": Filters(labels=("nightly",), start=date(2026, 1, 1), end=date(2026, 12, 31), limit=500),
}


def _agree(level: pd.DataFrame, exact: pd.DataFrame) -> None:
    """Same keys; counts equal; each median within ALPHA of the exact one (null where it is null);
    saved_ms and break_even_steps derived from the level's medians."""
    level, exact = (x.set_index(KEYS).sort_index() for x in (level, exact))
    assert list(level.index) == list(exact.index)
    pd.testing.assert_frame_equal(level[COUNTS], exact[COUNTS])
    for col in ("steady_ms", "compile_ms", "compile_cost_ms", "eager_ms"):
        got, want = level[col], exact[col]
        assert (got.isna() == want.isna()).all(), col
        bound = sketch.ALPHA * want.abs() * (1 + 1e-9)
        assert ((got - want).abs() <= bound).where(want.notna(), True).all(), (col, (got - want).abs().max())
    pd.testing.assert_series_equal(level["saved_ms"], level["eager_ms"] - level["steady_ms"], check_names=False)
    derived = [math.ceil(c / s) if s > 0 else None for c, s in zip(level["compile_cost_ms"], level["saved_ms"])]
    assert [None if pd.isna(x) else x for x in level["break_even_steps"]] == derived


def test_the_level_agrees_with_the_runs(db):
    with open_store(db).read() as con:
        months = con.execute("SELECT count(DISTINCT month) FROM rollup_month_linkage").fetchall()[0][0]
        assert months >= 10
        for name, f in {**VIEWS, **EXACT_VIEWS}.items():
            exact = compile_time.linkage_per_run(con, f)
            level = compile_time.linkage_per_cell(con, f)
            assert len(exact) > 0, name
            _agree(level, exact)


def test_several_runs_in_several_months_merge_into_one_median(db):
    """The year's llama-finetune rows each hold runs of several months and two GPUs: their medians
    come from bins added across cells."""
    f = VIEWS["models, year"]
    with open_store(db).read() as con:
        level = compile_time.linkage_per_cell(con, f).set_index("model")
        cells = con.execute("""SELECT count(DISTINCT (month, hardware)) FROM rollup_month_linkage
                               WHERE model = 'llama-finetune' AND callable = 'Llama.forward'""").fetchall()[0][0]
    row = level.loc["llama-finetune"]
    row = row[row["callable"] == "Llama.forward"].iloc[0]
    assert row["runs"] == 12 and cells >= 6


def test_the_view_reads_the_level_over_whole_months_and_the_runs_otherwise(db):
    with open_store(db).read() as con:
        for views, read in ((VIEWS, compile_time.linkage_per_cell), (EXACT_VIEWS, compile_time.linkage_per_run)):
            for name, f in views.items():
                pd.testing.assert_frame_equal(compile_time.runtime_linkage(con, f), read(con, f), obj=name)
        # the two paths differ (the level's medians are estimates), so the choice above is seen
        f = VIEWS["year"]
        assert not compile_time.linkage_per_cell(con, f).equals(compile_time.linkage_per_run(con, f))
