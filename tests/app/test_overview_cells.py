"""The Overview's KPIs and daily activity read from the cells (migrations/028_overview_rollups.sql)
equal what the per-run path gives, on a team's store built from real logs (conftest.team_db: runs
of 2026-11-22 to 28, the bench runs among them on the 22nd): each path forced in turn, over windows
that read the month level alone, the day level alone and both, with the runs in the current window,
in the previous one or split between them, and with each global filter."""
from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import overview
from compilewatch.store import open_store

YEAR = Filters(start=date(2025, 12, 1), end=date(2026, 11, 30))   # twelve whole months: the month level
VIEWS = {
    "year of whole months": YEAR,
    # Nov 2025's and Nov 2026's days at the edges, the months between whole
    "year with partial months": Filters(start=date(2025, 11, 25), end=date(2026, 11, 24)),
    # the runs in the window before, read from its whole months
    "year after the runs": Filters(start=date(2026, 12, 1), end=date(2027, 11, 30)),
    # the runs split between the windows: the current one from Nov 2026's days 24-30, the one
    # before from the days of its partial Nov 2026
    "year split inside the runs": Filters(start=date(2026, 11, 24), end=date(2027, 11, 23)),
    "whole Nov between partial months": Filters(start=date(2026, 10, 20), end=date(2026, 12, 10)),
    "two days against the two before": Filters(start=date(2026, 11, 23), end=date(2026, 11, 24)),
    "year, one model": YEAR.replace(models=("llama-pretrain",)),
    "year, one model with speedups, one hardware": YEAR.replace(models=("bert_base",), hardware=("NVIDIA H200 ×1",)),
    "year, one hardware": YEAR.replace(hardware=("NVIDIA H200 ×1",)),
    "year, one torch version": YEAR.replace(torch_versions=("2.13.0+cpu",)),
    "year, labels (the day level alone)": YEAR.replace(labels=("default/infer", "v2-breaks")),
    "year split, two models": Filters(start=date(2026, 11, 24), end=date(2027, 11, 23),
                                      models=("llama-pretrain", "toy-job")),
}


@pytest.fixture(scope="module")
def con(team_db):
    with open_store(team_db).read() as c:
        yield c


def _both_paths(monkeypatch, fn, con, f: Filters) -> tuple[pd.DataFrame, pd.DataFrame]:
    """fn's frame with the cells forced, and with the per-run path forced."""
    monkeypatch.setattr(overview, "from_cells", lambda f: True)
    cells = fn(con, f)
    monkeypatch.setattr(overview, "from_cells", lambda f: False)
    return cells, fn(con, f)


@pytest.mark.parametrize("view", list(VIEWS))
def test_the_cells_give_the_per_run_answer(con, monkeypatch, view):
    f = VIEWS[view]
    cells, per_run = _both_paths(monkeypatch, overview.kpis, con, f)
    # sums of floats in another order: the speedup's logarithms and the compile seconds
    pd.testing.assert_frame_equal(cells, per_run, check_exact=False, rtol=1e-12)
    cells, per_run = _both_paths(monkeypatch, overview.daily, con, f)
    pd.testing.assert_frame_equal(cells, per_run, check_exact=True)


def test_the_views_compared_hold_runs_speedups_and_both_windows(con, monkeypatch):
    """What makes the comparisons above able to fail: runs, breaks, recompiles and speedups in both
    windows and in each level."""
    monkeypatch.setattr(overview, "from_cells", lambda f: False)
    figures = {view: overview.kpis(con, f).set_index("metric") for view, f in VIEWS.items()}
    runs = figures["year of whole months"].at["runs", "current"]
    assert runs > 20 and figures["year after the runs"].at["runs", "previous"] == runs
    split = figures["year split inside the runs"]
    assert split.at["runs", "current"] > 0 and split.at["runs", "previous"] > 0
    assert split.at["recompiles", "current"] > 0 and split.at["graph_breaks", "previous"] > 0
    assert figures["year, one model with speedups, one hardware"].at["geomean_speedup", "current"] > 0
    hardware = figures["year, one hardware"]
    assert hardware.at["geomean_speedup", "current"] > 0 and hardware.at["compile_time_s", "current"] > 0
    assert 0 < figures["year, labels (the day level alone)"].at["runs", "current"] < runs
    assert len(overview.daily(con, VIEWS["year split inside the runs"])["win"].unique()) == 2


def test_a_long_window_reads_the_cells_and_a_week_every_run():
    assert overview.from_cells(YEAR) and overview.from_cells(VIEWS["whole Nov between partial months"])
    assert not overview.from_cells(Filters(start=date(2026, 11, 22), end=date(2026, 11, 28)))
    assert not overview.from_cells(Filters(end=date(2026, 11, 28))) and not overview.from_cells(Filters())
