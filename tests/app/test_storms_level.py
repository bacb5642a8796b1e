"""The storms level (store/month_storms.py): the Recompile storms table read from each month cell's
stormiest rows is the table read run by run, for windows of whole months, partial months and both,
with key filters, and when a cell holds more rows than the level keeps. The store is real logs
ingested (tests/app/conftest.py: team_db, runs of 2026-11-22..25)."""
from __future__ import annotations

import shutil
from datetime import date

import pandas as pd
import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import recompiles
from compilewatch.store import month_storms, open_store

WINDOWS = [
    (None, None),                               # all time: every month whole, the level alone
    (date(2026, 11, 1), date(2026, 11, 30)),    # one whole month
    (date(2026, 10, 1), date(2026, 11, 23)),    # a whole (empty) month and a partial one, run by run
    (date(2026, 11, 23), date(2026, 11, 24)),   # no whole month: run by run
]


def _table(con, f: Filters, *, level: bool, monkeypatch) -> pd.DataFrame:
    with monkeypatch.context() as m:
        if not level:
            m.setattr(recompiles, "whole_months", lambda f: None)
        return recompiles.storms(con, f).drop(columns=["run_time"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def lean_level(team_db, tmp_path_factory):
    """team_db with the level chosen again keeping 2 rows a cell, so that cells overflow it."""
    folder = tmp_path_factory.mktemp("storms") / "store"
    shutil.copytree(team_db.parent, folder)
    store = open_store(folder / team_db.name)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(month_storms, "ROWS_PER_CELL", 2)
        with store.write() as con:
            month_storms.refresh_month_storms(con)
        return store


def test_the_level_holds_the_cells_top_rows_in_the_tables_order(team_db):
    with open_store(team_db).read() as con:
        kept = con.execute("SELECT count(*), count(DISTINCT (month, model, hardware, torch_version)), "
                           "count(*) FILTER (WHERE storm) FROM rollup_month_storms").fetchone()
        every = con.execute(f"SELECT count(*) FROM ({month_storms.storm_rows('runs')})").fetchone()[0]
    assert kept[0] == every > 0 and kept[2] > 0   # fewer than 200 rows a cell: every row is kept


@pytest.mark.parametrize("start,end", WINDOWS)
@pytest.mark.parametrize("limit", [1, 2, 50])
def test_storms_from_the_level_equal_storms_run_by_run(team_db, lean_level, monkeypatch, start, end, limit):
    for store in (open_store(team_db), lean_level):
        if store is lean_level and limit > 2:
            continue   # more rows than that level keeps a cell: read run by run (checked below)
        with store.read() as con:
            models = con.execute("SELECT model FROM rollup_month_storms GROUP BY 1 ORDER BY count(*) DESC "
                                 "LIMIT 1").fetchone()
            for f in (Filters(start=start, end=end, limit=limit),
                      Filters(start=start, end=end, limit=limit, models=models)):
                want = _table(con, f, level=False, monkeypatch=monkeypatch)
                got = _table(con, f, level=True, monkeypatch=monkeypatch)
                pd.testing.assert_frame_equal(got, want)
                if start is None:
                    assert len(want) == min(limit, len(_table(con, f.replace(limit=200), level=False,
                                                                  monkeypatch=monkeypatch)))


def test_more_rows_than_a_cell_keeps_are_read_run_by_run(lean_level, monkeypatch):
    monkeypatch.setattr(month_storms, "ROWS_PER_CELL", 2)
    with lean_level.read() as con:
        f = Filters(limit=50)
        cells = con.execute("SELECT count(DISTINCT (month, model, hardware, torch_version)) "
                            "FROM rollup_month_storms").fetchone()[0]
        got = _table(con, f, level=True, monkeypatch=monkeypatch)
        assert len(got) > 2 * cells     # more than the level holds: every run's rows were read
        pd.testing.assert_frame_equal(got, _table(con, f, level=False, monkeypatch=monkeypatch))
