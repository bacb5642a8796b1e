"""The page queries on the fixture team DB: what the weekly review must surface, and the
contract every query keeps (a DataFrame, parameterised, no streamlit)."""
from __future__ import annotations

import ast
import inspect
from datetime import date
from pathlib import Path

import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import common, compare, hotspots, overview, recompiles, run_detail, speedups, upload
from compilewatch.app.queries import review as review_q
from compilewatch.store import open_store

import fixture_db

WEEK = Filters(start=date(2026, 11, 14), end=fixture_db.END)
ALL = Filters(start=date(2026, 10, 1), end=fixture_db.END)
MODULES = (common, compare, hotspots, overview, recompiles, run_detail, speedups, upload, review_q)
HELPERS = {"geomean", "run_where", "runs_cte", "df", "mode", "new_since", "storm_run", "guard_hint", "per_hardware",
           "weekly"}


@pytest.fixture(scope="module")
def con(team_db):
    with open_store(team_db).read() as c:
        yield c


def _query_functions():
    for mod in MODULES:
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ == mod.__name__ and not name.startswith("_") and name not in HELPERS:
                yield f"{mod.__name__}.{name}", fn


@pytest.mark.parametrize("name,fn", list(_query_functions()))
def test_every_query_returns_a_frame_for_any_filters(con, name, fn):
    for f in (WEEK, ALL.replace(models=("hf_Bert",), run_id="run-storm", run_b="run-errors", version_a="2.5.1",
                                version_b="2.6.0", break_key="x"), Filters(start=date(2020, 1, 1), end=date(2020, 1, 2))):
        out = fn(con, f)
        assert hasattr(out, "columns"), name


def test_queries_import_no_streamlit_and_use_placeholders():
    folder = Path(overview.__file__).parent
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.startswith("streamlit") for n in names), path


def test_kpis_compare_the_window_with_the_one_before(con):
    k = overview.kpis(con, WEEK).set_index("metric")
    assert k.at["runs", "current"] == 15 and k.at["runs", "previous"] == 14   # run-storm is extra
    assert k.at["geomean_speedup", "current"] < k.at["geomean_speedup", "previous"]
    assert k.at["recompiles", "change_pct"] > 0


def test_movers_name_hf_bert_as_worse(con):
    m = overview.movers(con, WEEK)
    worse = m[m["verdict"] == "worse"]
    row = worse[(worse["model"] == "hf_Bert") & (worse["metric"] == "speedup (geomean)")]
    assert len(row) == 1 and row["change_pct"].iloc[0] < -10


def test_new_break_is_flagged_and_old_ones_are_not(con):
    h = hotspots.hotspots(con, WEEK).set_index("break_key")
    assert h.at[fixture_db.break_key(fixture_db.NEW_BREAK), "new_this_week"]
    assert not h.at[fixture_db.break_key(fixture_db.BREAKS[0]), "new_this_week"]
    only_new = hotspots.hotspots(con, WEEK.replace(only_new=True))
    assert list(only_new["break_key"]) == [fixture_db.break_key(fixture_db.NEW_BREAK)]


def test_hotspots_filters_narrow(con):
    everything = hotspots.hotspots(con, ALL)
    resnet = hotspots.hotspots(con, ALL.replace(models=("resnet50",)))
    assert resnet["occurrences"].sum() < everything["occurrences"].sum()
    assert set(resnet["model_list"]) == {"resnet50"}
    assert hotspots.hotspots(con, ALL.replace(limit=2)).shape[0] == 2
    found = hotspots.hotspots(con, ALL.replace(search="AUGMENT.py"))
    assert list(found["user_file"]) == ["/home/team/data/augment.py"]


def test_storm_is_flagged_with_its_reasons(con):
    s = recompiles.storms(con, WEEK)
    top = s.iloc[0]
    assert (top["run_id"], top["function"], top["storm"]) == ("run-storm", "forward", True)
    assert top["limit_hits"] == 1 and top["recompiles"] == 12 and top["top_category"] == "size_mismatch"
    assert "hit recompile_limit" in top["why"] and "12 recompiles" in top["why"] and "within a minute" in top["why"]


def test_timeline_defaults_to_the_stormiest_run(con):
    t = recompiles.timeline(con, WEEK)
    assert set(t["run_id"]) == {"run-storm"}
    assert list(t["cumulative"]) == list(range(1, 13))
    assert t["t_s"].iloc[-1] == pytest.approx(44.0)


def test_guard_categories_carry_a_fix_hint(con):
    g = recompiles.guard_categories(con, ALL).set_index("category")
    assert "mark_dynamic" in g.at["size_mismatch", "hint"]
    assert "torch.no_grad" in g.at["requires_grad", "hint"]
    assert g["failures"].is_monotonic_decreasing


def test_version_table_geomean_row_and_sign(con):
    t = speedups.version_table(con, ALL.replace(version_a="2.5.1", version_b="2.6.0")).set_index("model")
    assert t.at["timm_vit", "speedup_change_pct"] > 5
    assert t.at["hf_Bert", "speedup_change_pct"] < -5
    assert "geomean (all models)" in t.index


def test_by_version_orders_oldest_first(con):
    assert list(speedups.by_version(con, ALL)["version"]) == ["2.5.1", "2.6.0"]
    assert set(speedups.by_version(con, ALL.replace(dimension="label"))["version"]) == {"main", "pr-417"}


def test_compare_runs_new_and_fixed(con):
    f = ALL.replace(run_id="run-errors", run_b="run-storm")
    d = compare.break_diff(con, f).set_index("break_key")
    assert d.at[fixture_db.break_key(fixture_db.NEW_BREAK), "status"] == "new"
    s = compare.summary(con, f).set_index("side")
    assert s.at["B", "limit_hits"] == 1 and s.at["A", "limit_hits"] == 0


def test_compare_versions_uses_per_run_rates(con):
    f = ALL.replace(version_a="2.5.1", version_b="2.6.0")
    s = compare.summary(con, f).set_index("side")
    assert s.at["A", "runs"] > 0 and s.at["B", "runs"] > 0
    sp = compare.speedup_diff(con, f).set_index("model")
    assert sp.at["hf_Bert", "speedup_change_pct"] < 0


def test_run_detail_pieces(con):
    f = Filters(run_id="run-storm")
    m = run_detail.manifest(con, f).iloc[0]
    assert (m["recompiles"], m["limit_hits"], m["compiles"]) == (12, 1, 3)
    steps = run_detail.step_summary(con, f)
    steady = steps[(steps["mode"] == "compiled") & (steps["phase"] == "steady")]
    warm = steps[(steps["mode"] == "compiled") & (steps["phase"] == "compile")]
    assert warm["median_ms"].iloc[0] > 10 * steady["median_ms"].iloc[0]
    assert list(run_detail.phases(con, f)["start_ms"]) == sorted(run_detail.phases(con, f)["start_ms"])
    assert run_detail.errors(con, Filters(run_id="run-errors"))["kind"].tolist() == ["json", "json", "payload_md5"]
