"""Compare's two torch versions read from the cells (store/compare_cells.py: whole weeks from the week
cells, the other days from the day cells; the bench weeks) equal what the runs' rollups give
(app/queries/compare.py chooses in reads_cells; here each is forced in turn), on real logs: the team
store of tests/app/conftest.py (team_db: CPU runs on torch 2.13 and 2.14.1, H100 and H200 runs on
2.11), its runs moved back by 0 to 45 days, nine days apart, so that they span seven weeks across
two months, and every derived table rebuilt (store/derived.py: refresh_all). Windows: open, whole
weeks only, edges cutting weeks that hold runs at both ends, one side open, and one with no whole
week; with a model filter, a hardware filter, and the two sides on different hardware. The figures
the page shows are also checked against the runs' rollups summed here in pandas."""
from __future__ import annotations

import shutil
from datetime import date

import duckdb
import numpy as np
import pandas as pd
import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import compare
from compilewatch.store import open_store
from compilewatch.store.derived import refresh_all

WINDOWS = {
    "open": (None, None),
    "whole weeks": (date(2026, 10, 5), date(2026, 11, 29)),        # Monday to Sunday
    "cut weeks": (date(2026, 10, 8), date(2026, 11, 24)),          # Thursday to Tuesday
    "open start": (None, date(2026, 11, 10)),
    "no whole week": (date(2026, 11, 18), date(2026, 11, 23)),     # Wednesday to Monday: day cells alone
}
QUERIES = ("summary", "break_diff", "recompile_diff", "speedup_diff", "runtime")
# the rows' order among equal sort keys is not the page's to keep
ORDER = {"speedup_diff": ["model", "hardware"]}
# one occurrence's text (any) stands for its key's: either way a real one, not necessarily the same
ANY = ("gb_type", "reason", "location")


@pytest.fixture(scope="module")
def weeks_db(team_db, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare-weeks") / "store"
    shutil.copytree(team_db.parent, folder)
    path = folder / team_db.name
    con = duckdb.connect(str(path))
    con.execute("""UPDATE runs SET started_at = started_at - to_days(9 * k), ingested_at = ingested_at - to_days(9 * k)
                   FROM (SELECT run_id, (row_number() OVER (ORDER BY run_id) % 6)::INTEGER AS k FROM runs) m
                   WHERE runs.run_id = m.run_id""")
    refresh_all(con)
    con.close()
    return path


@pytest.fixture(scope="module")
def con(weeks_db):
    with open_store(weeks_db).read() as c:
        yield c


def _cpu(con) -> str:
    """The hardware that ran two torch versions: the CPU runs of sample_logs/."""
    (hardware,) = con.execute("SELECT hardware FROM runs GROUP BY 1 HAVING count(DISTINCT torch_version) = 2").fetchone()
    return hardware


def _pairs(con) -> dict[str, tuple[str, str]]:
    """The two torch versions that ran on one CPU, and two whose runs ran on different hardware."""
    cpu = [v for (v,) in con.execute("SELECT torch_version FROM runs WHERE hardware = ? GROUP BY 1 ORDER BY 1",
                                     [_cpu(con)]).fetchall()]
    other = con.execute("SELECT torch_version FROM runs WHERE hardware LIKE 'NVIDIA%' "
                        "GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    assert len(cpu) == 2 and other not in cpu, (cpu, other)
    return {"cpu": (cpu[0], cpu[1]), "across hardware": (other, cpu[0])}


def _both(monkeypatch, q: str, con, f: Filters) -> tuple[pd.DataFrame, pd.DataFrame]:
    """q's frame from the cells (reading the runs' rollups there would fail, but for the bench rows
    under a model filter: a bench week's model is the bench row's) and from the runs."""
    def no_runs(f):
        raise AssertionError("the cells' path read the runs' rollups")
    with monkeypatch.context() as m:
        m.setattr(compare, "reads_cells", lambda f: True)
        if not f.models:
            m.setattr(compare, "_sides", no_runs)
        weeks = getattr(compare, q)(con, f)
    with monkeypatch.context() as m:
        m.setattr(compare, "reads_cells", lambda f: False)
        runs = getattr(compare, q)(con, f)
    return weeks, runs


def _same(q: str, weeks: pd.DataFrame, runs: pd.DataFrame) -> None:
    assert list(weeks.columns) == list(runs.columns)
    if q in ORDER:
        weeks, runs = (d.sort_values(ORDER[q]).reset_index(drop=True) for d in (weeks, runs))
    cols = [c for c in runs.columns if c not in ANY]
    for c in cols:
        a, b = weeks[c], runs[c]
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            assert np.allclose(a.astype(float), b.astype(float), rtol=1e-9, equal_nan=True), (q, c, a, b)
        else:
            assert list(a.astype(str)) == list(b.astype(str)), (q, c)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("pair", ["cpu", "across hardware"])
@pytest.mark.parametrize("keys", ["none", "model", "hardware"])
def test_the_cells_give_what_the_runs_give(con, monkeypatch, window, pair, keys):
    a, b = _pairs(con)[pair]
    f = Filters(start=WINDOWS[window][0], end=WINDOWS[window][1], version_a=a, version_b=b, limit=50)
    if keys == "model":
        model = con.execute("SELECT model FROM runs WHERE torch_version = ? GROUP BY 1 ORDER BY count(*) DESC, 1 "
                            "LIMIT 1", [b]).fetchone()[0]
        f = f.replace(models=(model,))
    elif keys == "hardware":
        f = f.replace(hardware=(_cpu(con),))
    for q in QUERIES:
        weeks, runs = _both(monkeypatch, q, con, f)
        _same(q, weeks, runs)


def test_the_cells_serve_every_figure_of_a_window_that_cuts_weeks(con, monkeypatch):
    """The cut window's sides hold runs inside whole weeks and on its edge days, and each query
    returns rows for them: an equality of two empty frames would prove nothing."""
    a, b = _pairs(con)["cpu"]
    start, end = WINDOWS["cut weeks"]
    days = {d for (d,) in con.execute("SELECT DISTINCT started_at::DATE FROM runs WHERE torch_version IN (?, ?) "
                                      "AND started_at::DATE BETWEEN ? AND ?", [a, b, start, end]).fetchall()}
    assert {d for d in days if d < date(2026, 10, 12) or d > date(2026, 11, 22)}, days   # edge days hold runs
    assert {d for d in days if date(2026, 10, 12) <= d <= date(2026, 11, 22)}, days       # and whole weeks do
    f = Filters(start=start, end=end, version_a=a, version_b=b, limit=50)
    for q in QUERIES:
        weeks, _ = _both(monkeypatch, q, con, f)
        assert len(weeks), q


def test_the_sides_figures_are_the_runs_rollups_summed(con, monkeypatch):
    """Summary and break counts from the cells against the runs' rollups summed in pandas."""
    a, b = _pairs(con)["cpu"]
    start, end = WINDOWS["cut weeks"]
    f = Filters(start=start, end=end, version_a=a, version_b=b, limit=1000)
    runs = con.execute("SELECT run_id, torch_version FROM runs WHERE torch_version IN (?, ?) "
                       "AND coalesce(started_at, ingested_at)::DATE BETWEEN ? AND ?", [a, b, start, end]).df()
    runs["side"] = np.where(runs["torch_version"] == a, "A", "B")
    totals = runs.merge(con.execute("SELECT * FROM rollup_run_totals").df(), on="run_id", how="left")
    breaks = con.execute("SELECT run_id, break_key, n FROM rollup_graph_breaks").df().merge(runs, on="run_id")
    with monkeypatch.context() as m:
        m.setattr(compare, "reads_cells", lambda f: True)
        summary = compare.summary(con, f).set_index("side")
        diff = compare.break_diff(con, f).set_index("break_key")
    for side, group in totals.groupby("side"):
        row = summary.loc[side]
        assert row["runs"] == len(group)
        for col in ("graph_breaks", "recompiles", "limit_hits"):
            assert row[col] == group[col].fillna(0).sum(), (side, col)
        assert row["distinct_breaks"] == breaks[breaks["side"] == side]["break_key"].nunique()
    per_key = breaks.pivot_table(index="break_key", columns="side", values="n", aggfunc="sum", fill_value=0)
    assert set(diff.index) == set(per_key.index)
    n = totals.groupby("side").size()
    for side in ("A", "B"):
        got = diff[f"per_run_{side.lower()}"].sort_index()
        want = (per_key.get(side, pd.Series(0, index=per_key.index)) / n.get(side, 1)).sort_index()
        assert np.allclose(got.values, want.values), side


def test_which_way_a_comparison_reads():
    start, end = date(2026, 9, 1), date(2026, 11, 29)
    f = Filters(start=start, end=end, version_a="2.13.0", version_b="2.14.1")
    assert compare.reads_cells(f)
    assert compare.reads_cells(f.replace(start=None, end=None))
    assert not compare.reads_cells(f.replace(labels=("nightly",)))            # a label is not part of a cell
    assert not compare.reads_cells(f.replace(dimension="label"))               # nor are labels as sides
    assert compare.reads_cells(f.replace(start=date(2026, 11, 27)))            # a short window: day cells
    assert not compare.reads_cells(f.replace(run_id="a", run_b="b"))           # two runs
