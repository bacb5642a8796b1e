"""The Trends page's speedups read from the bench weeks (store/bench_weeks.py) equal what the bench
rows give (app/queries/speedups.py chooses between them in _reads_weeks; here each is forced in
turn), over a year of real bench results: every bench bundle of sample_logs/ (CPU on torch 2.13 and
2.14.1, an H200 on 2.11; several runs of one model in a week), each bundle's manifest dated in turn
over ten months as if it had run then, and one bench.csv ingested alone under another model's name
(its rows keep their own model, the run has the other). Windows: open, a year whose edges cut weeks
that hold runs, a model filter, hardware and torch version filters, one side open, and a long window
whose rows span less than a quarter."""
from __future__ import annotations

import itertools
import tarfile
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.app.cells import whole_weeks
from compilewatch.app.filters import Filters
from compilewatch.app.queries import speedups
from compilewatch.ingest.bundle import MANIFEST, read_manifest, write_manifest
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
BENCH_BUNDLES = sorted(p for p in (REPO / "sample_logs").glob("*/*.tar.gz")
                       if any(n.endswith("/bench.csv") for n in tarfile.open(p).getnames()))
# the first run's time: a Wednesday; bundle k runs (k // 3) * 23 days later, plus k % 3 days and k hours
FIRST = datetime(2025, 11, 5, 10, tzinfo=timezone.utc)
LOOSE_MODEL = "nightly-suite"


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    assert len(BENCH_BUNDLES) >= 20, BENCH_BUNDLES
    tmp = tmp_path_factory.mktemp("year")
    bundles = []
    for k, archive in enumerate(BENCH_BUNDLES[:-1]):
        # a bundle's manifest and its bench results: what the speedups read (the traces would only
        # slow the ingest down)
        with tarfile.open(archive) as tf:
            tf.extractall(tmp / f"{k:02d}", filter="data", members=[
                m for m in tf.getmembers() if m.isfile() and m.name.rsplit("/", 1)[-1] in (MANIFEST, "bench.csv")])
        (folder,) = (tmp / f"{k:02d}").iterdir()
        m = read_manifest(folder)
        start = FIRST + timedelta(days=(k // 3) * 23 + k % 3, hours=k)
        m.started_at, m.ended_at = (t.strftime("%Y-%m-%dT%H:%M:%S.000Z") for t in (start, start + timedelta(minutes=5)))
        write_manifest(folder, m)
        bundles.append(folder)
    with tarfile.open(BENCH_BUNDLES[-1]) as tf:
        (csv,) = [m for m in tf.getmembers() if m.name.endswith("/bench.csv")]
        tf.extractall(tmp / "loose", filter="data", members=[csv])
    store = open_store(tmp / "cw.duckdb")
    assert ingest_paths(store, bundles).ok
    assert ingest_paths(store, [tmp / "loose" / csv.name], model=LOOSE_MODEL).ok   # dated when ingested
    with store.read() as c:
        yield c


def _both(monkeypatch, fn, con, f) -> tuple[pd.DataFrame, pd.DataFrame]:
    """fn's frame from the bench weeks alone (reading a bench row of a whole week would fail) and
    from the bench rows."""
    def no_rows(f):
        raise AssertionError("the bench weeks path read the bench rows")
    with monkeypatch.context() as m:
        m.setattr(speedups, "_reads_weeks", lambda f, versions: True)
        m.setattr(speedups, "_bench_cte", no_rows)
        weeks = fn(con, f)
    with monkeypatch.context() as m:
        m.setattr(speedups, "_reads_weeks", lambda f, versions: False)
        rows = fn(con, f)
    return weeks, rows


def _days(con) -> list[date]:
    return [d for (d,) in con.execute("SELECT DISTINCT coalesce(started_at, ingested_at)::DATE FROM runs r "
                                      "WHERE run_id IN (SELECT run_id FROM bench_results) ORDER BY 1").fetchall()]


def _windows(con) -> dict[str, Filters]:
    days = _days(con)
    versions = [v for (v,) in con.execute("SELECT DISTINCT torch_version FROM runs ORDER BY 1").fetchall()]
    hardware = con.execute("SELECT hardware FROM runs GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    year = Filters(start=days[3], end=days[-3])
    return {"open": Filters(), "year": year,
            "year, two models": year.replace(models=("resnet50", "mlp")),
            "hardware": Filters(start=days[1], end=days[-5], hardware=(hardware,)),
            "torch versions, from a day on": Filters(start=days[2], torch_versions=tuple(versions[:2])),
            "until a day": Filters(end=days[-4])}


def _bench_days(con, lo: date, after: date) -> int:
    return con.execute("SELECT count(*) FROM bench_results JOIN runs r USING (run_id) "
                       "WHERE coalesce(r.started_at, r.ingested_at) >= ? AND coalesce(r.started_at, r.ingested_at) < ?",
                       [lo, after]).fetchone()[0]


def test_the_data_spans_a_year_and_the_windows_cut_weeks_that_hold_runs(con):
    """What the comparisons below stand on: bench rows over more than a quarter on several kinds
    of hardware and three torch versions, a bench row whose model is not its run's, and a year window
    whose partial weeks at both edges hold bench rows (read from the rows, not the weeks)."""
    days = _days(con)
    assert (days[-1] - days[0]).days > 300
    kinds, versions = con.execute("SELECT count(DISTINCT hardware), count(DISTINCT torch_version) FROM runs").fetchone()
    assert kinds >= 2 and versions == 3
    assert con.execute("SELECT count(*) FROM bench_results b JOIN runs r USING (run_id) WHERE r.model = ? "
                       "AND b.model <> r.model", [LOOSE_MODEL]).fetchone()[0] > 0
    assert con.execute("SELECT max(runs) FROM rollup_week_bench").fetchone()[0] >= 2
    year = _windows(con)["year"]
    first, after = whole_weeks(year)
    assert year.start < first and after <= year.end
    assert _bench_days(con, year.start, first) > 0 and _bench_days(con, after, year.end + timedelta(days=1)) > 0


@pytest.mark.parametrize("window", ["open", "year", "year, two models", "hardware", "torch versions, from a day on",
                                    "until a day"])
def test_the_weeks_give_the_bench_rows_figures(con, monkeypatch, window):
    f = _windows(con)[window]
    weeks, rows = _both(monkeypatch, speedups.trend, con, f)
    assert len(rows) > 0
    assert (rows["period"].dt.day_of_week == 0).all() and (rows["period"].dt.hour == 0).all()   # weekly points
    pd.testing.assert_frame_equal(weeks, rows, rtol=1e-9)
    weeks, rows = _both(monkeypatch, speedups.by_version, con, f)
    assert len(rows) > 0
    pd.testing.assert_frame_equal(weeks.sort_values("version", ignore_index=True),
                                  rows.sort_values("version", ignore_index=True), rtol=1e-9)
    versions = [v for (v,) in con.execute("SELECT DISTINCT torch_version FROM runs ORDER BY 1").fetchall()]
    for a, b in itertools.permutations(versions, 2):
        weeks, rows = _both(monkeypatch, speedups.version_table, con, f.replace(version_a=a, version_b=b))
        pd.testing.assert_frame_equal(weeks, rows, rtol=1e-9)


def test_a_model_filter_picks_the_bench_rows_own_model(con, monkeypatch):
    """The loose bench.csv's rows name their own model; its run has another: a filter on the rows'
    model finds them, one on the run's finds none, either way."""
    own = con.execute("SELECT any_value(b.model) FROM bench_results b JOIN runs r USING (run_id) "
                      "WHERE r.model = ?", [LOOSE_MODEL]).fetchone()[0]
    since = Filters(start=_days(con)[3])
    weeks, rows = _both(monkeypatch, speedups.trend, con, since.replace(models=(own,)))
    pd.testing.assert_frame_equal(weeks, rows, rtol=1e-9)
    loose = con.execute("SELECT count(*) FROM runs WHERE model = ?", [LOOSE_MODEL]).fetchone()[0]
    bundled = con.execute("SELECT count(DISTINCT run_id) FROM bench_results b JOIN runs r USING (run_id) "
                          "WHERE b.model = ? AND r.model = ? AND r.started_at >= ?", [own, own, since.start]).fetchone()[0]
    assert loose == 1 and rows["runs"].sum() == bundled + loose
    for fn in (speedups.trend, speedups.by_version):
        weeks, rows = _both(monkeypatch, fn, con, since.replace(models=(LOOSE_MODEL,)))
        assert weeks.empty and rows.empty


def test_rows_that_span_less_than_a_quarter_get_finer_points_from_the_rows(con, monkeypatch):
    """A long window whose bench rows span less than a quarter: the trend's points are days, which
    only the rows give; the weeks path hands it to them, and the versions still come from the weeks."""
    days = _days(con)
    f = Filters(start=days[0] - timedelta(days=200), end=days[6])
    assert speedups._reads_weeks(f, versions=False)
    got = speedups.trend(con, f)
    assert len(got) and (got["period"].dt.day_of_week != 0).any()
    with monkeypatch.context() as m:
        m.setattr(speedups, "_reads_weeks", lambda f, versions: False)
        pd.testing.assert_frame_equal(got, speedups.trend(con, f))
    weeks, rows = _both(monkeypatch, speedups.by_version, con, f)
    pd.testing.assert_frame_equal(weeks.sort_values("version", ignore_index=True),
                                  rows.sort_values("version", ignore_index=True), rtol=1e-9)


def test_which_path_a_view_reads(con):
    """The bench weeks for long windows with filters that are part of a week cell; the rows for a
    label filter, labels or commits compared, and short windows."""
    year = _windows(con)["year"]
    assert speedups._reads_weeks(year, versions=False) and speedups._reads_weeks(year, versions=True)
    assert speedups._reads_weeks(Filters(), versions=False)
    assert not speedups._reads_weeks(year.replace(labels=("default/train",)), versions=False)
    assert not speedups._reads_weeks(year.replace(dimension="label"), versions=True)
    assert speedups._reads_weeks(year.replace(dimension="label"), versions=False)
    assert not speedups._reads_weeks(year.replace(dimension="git_commit"), versions=True)
    quarter = Filters(start=date(2026, 1, 1), end=date(2026, 1, 1) + timedelta(days=89))   # the page's default
    assert not speedups._reads_weeks(quarter, versions=False) and speedups._reads_weeks(quarter, versions=True)
    month = Filters(start=date(2026, 1, 1), end=date(2026, 1, 30))
    assert not speedups._reads_weeks(month, versions=False) and not speedups._reads_weeks(month, versions=True)
    # a label filter's figures: the bench rows', the same either way the choice goes
    f = year.replace(labels=("default/train",))
    got = speedups.by_version(con, f)
    assert len(got) and speedups.by_version(con, f.replace(labels=())).shape[0] >= len(got)


def test_a_point_names_its_first_labels_and_how_many_more(con, monkeypatch):
    """A week of many PR labels: the tooltip lists the first few and counts the rest, the same from
    the weeks and from the rows (the page sent every label of a year's points before)."""
    f = _windows(con)["open"]
    whole = speedups.trend(con, f)
    most = whole["labels"].str.count(", ").max() + 1
    assert most >= 2, "the store's weeks hold one label each: the cut would not be exercised"
    monkeypatch.setattr(speedups, "LABELS_SHOWN", 1)
    weeks, rows = _both(monkeypatch, speedups.trend, con, f)
    pd.testing.assert_frame_equal(weeks, rows, rtol=1e-9)
    cut = rows["labels"][whole["labels"].str.contains(", ")]
    assert len(cut) and cut.str.fullmatch(r"[^,]+, … \(\+\d+ more\)").all(), cut.tolist()
    named = whole["labels"].notna()
    assert (rows["labels"][named].str.split(", ").str[0] == whole["labels"][named].str.split(", ").str[0]).all()
    assert rows["labels"][~named].isna().all()
