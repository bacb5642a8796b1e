"""AppTest for every page: renders with data (the fixture team DB, and real logs parsed by the
loader), renders with an empty database, and a filter interaction changes what is shown.

Run: .venv/bin/python -m pytest tests/app
"""
from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from compilewatch.store import open_store

import fixture_db
from rendered import shown

PAGES = {
    "overview": "views/overview.py",
    "hotspots": "views/hotspots.py",
    "recompiles": "views/recompiles.py",
    "trends": "views/trends.py",
    "compile_time": "views/compile_time.py",
    "run_detail": "views/run_detail.py",
    "compare": "views/compare.py",
    "upload": "views/upload.py",
}


def _ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    parts += [s.value for s in at.subheader] + [t.value for t in at.title]
    return "\n".join(shown(p) for p in parts)


def _tables(at, *columns):
    """The shown tables having all these columns (AppTest keeps keys only on selectable tables)."""
    return [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]


def _table(at, *columns):
    found = _tables(at, *columns)
    assert found, f"no table with columns {columns}"
    return found[0]


# -- renders with data -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_with_team_data(app_at, team_db, name):
    at = app_at(team_db, PAGES[name])
    _ok(at)
    expected = {
        "overview": lambda: [m.label for m in at.metric][:3] == ["Runs", "Models", "Speedup"],
        "hotspots": lambda: "Data-dependent branching" in set(at.dataframe[0].value["what"]),
        "recompiles": lambda: "run-storm" in set(at.dataframe[0].value["run_id"]),
        "trends": lambda: len(at.dataframe) >= 2,   # per-version table + A-vs-B table
        "compile_time": lambda: len(at.dataframe) == 2 and not at.dataframe[0].value.empty,  # frames + linkage
        "run_detail": lambda: at.selectbox(key="rd_run").value is not None,
        "compare": lambda: [m.label for m in at.metric][0] == "Runs",
        "upload": lambda: any("dedicated_log_torch_trace" in str(v) for v in at.dataframe[0].value["original_name"]),
    }[name]
    assert expected(), name


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_with_real_logs(app_at, real_db, name):
    at = app_at(real_db, PAGES[name])
    _ok(at)


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_with_sample_logs(app_at, sample_db, name):
    at = app_at(sample_db, PAGES[name], query={"from": "2000-01-01", "to": "2100-01-01"})
    _ok(at)


# -- empty database --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_with_empty_database(app_at, empty_db, name):
    at = app_at(empty_db, PAGES[name])
    _ok(at)
    assert "No runs in the database yet" in _texts(at)
    assert any("compilewatch ingest" in c.value for c in at.code)


# -- filters change what is shown ---------------------------------------------------------------------
def test_overview_model_filter_changes_kpis_and_url(app_at, team_db):
    at = app_at(team_db)
    runs_all = at.metric[0].value
    at.multiselect(key="g_models").select("hf_Bert").run()
    _ok(at)
    assert at.metric[0].value != runs_all
    assert at.query_params.get("model") in ("hf_Bert", ["hf_Bert"])
    # the review's verdicts, one block per model and hardware led by its headline: hf_Bert's
    # speedup fell 1.45x -> 1.20x this week
    moved = _tables(at, "status", "metric", "evidence")
    heads = [m.value for m in at.markdown if m.value.startswith("**hf")]
    assert moved and len(heads) == len(moved) and all("hf\\_Bert on" in h or "hf_Bert on" in h for h in heads), heads
    worse = moved[0]
    assert (worse["metric"].str.startswith("Speedup") & (worse["status"] == "regression")).any()
    assert worse["compare"].notna().any() and worse["run"].notna().any()


def test_reset_filters_clears_the_selection(app_at, team_db):
    at = app_at(team_db, query={"model": "resnet50", "from": "2026-11-01", "to": "2026-11-07"})
    at.button(key="g_reset").click().run()
    _ok(at)
    assert at.multiselect(key="g_models").value == []
    assert at.date_input(key="g_window_7").value == (date(2026, 11, 14), fixture_db.END)
    assert "model" not in at.query_params


def test_overview_opens_from_a_pasted_link(app_at, team_db):
    at = app_at(team_db, query={"model": "resnet50", "from": "2026-11-01", "to": "2026-11-07"})
    _ok(at)
    assert at.multiselect(key="g_models").value == ["resnet50"]
    assert at.date_input(key="g_window_7").value == (fixture_db.END.replace(day=1), fixture_db.END.replace(day=7))
    assert at.query_params.get("from") == "2026-11-01"


def test_hotspots_new_this_week_toggle(app_at, team_db):
    at = app_at(team_db, PAGES["hotspots"])
    before = at.dataframe(key="hs_table").value
    assert len(before) > 1
    at.toggle(key="hs_new").set_value(True).run()
    _ok(at)
    after = at.dataframe(key="hs_table").value
    assert list(after["what"]) == [fixture_db.NEW_BREAK["gb_type"]]
    assert at.query_params.get("new") == "1"


def test_hotspots_search_and_break_link(app_at, team_db):
    key = fixture_db.break_key(fixture_db.BREAKS[1])
    at = app_at(team_db, PAGES["hotspots"], query={"break": key})
    _ok(at)
    # The linked break's detail: its hint and the runs it occurred in.
    assert "Avoid calling builtin `print`" in _texts(at)
    assert "first seen 2026-10-" in _texts(at) and "new this week" not in _texts(at)
    assert len(_table(at, "compile_ids")) > 0
    at.text_input(key="hs_search").input("augment.py").run()
    _ok(at)
    assert set(at.dataframe(key="hs_table").value["location"]) == {"/home/team/data/augment.py:17"}


def test_recompiles_only_storms_and_timeline(app_at, team_db):
    at = app_at(team_db, PAGES["recompiles"])
    table = at.dataframe(key="rc_table").value
    assert not table["storm"].all()
    at.toggle(key="rc_only_storms").set_value(True).run()
    _ok(at)
    storms = at.dataframe(key="rc_table").value
    assert storms["storm"].all() and "run-storm" in set(storms["run_id"])
    assert "hit recompile_limit" in set(storms["why"].str.split(";").str[0])
    # The fix hint for the storm's category is on the page.
    assert "mark_dynamic" in _texts(at)


def test_trends_dimension_switch(app_at, team_db):
    at = app_at(team_db, PAGES["trends"])
    assert set(_table(at, "geomean_speedup")["version"]) == {"2.5.1", "2.6.0"}
    at.segmented_control(key="tr_dim").set_value("label").run()
    _ok(at)
    assert set(_table(at, "geomean_speedup")["version"]) == {"main", "pr-417"}
    assert at.query_params.get("by") == "label"


def test_trends_version_table_flags_timm_vit_gain(app_at, team_db):
    at = app_at(team_db, PAGES["trends"], query={"a": "2.5.1", "b": "2.6.0", "from": "2026-10-01", "to": "2026-11-20"})
    _ok(at)
    table = _table(at, "speedup_change_pct")
    row = table[table["model"] == "timm_vit"].iloc[0]
    assert row["speedup_change_pct"] > 5


def test_run_detail_pick_run_shows_its_errors(app_at, team_db):
    at = app_at(team_db, PAGES["run_detail"])
    assert not _tables(at, "excerpt")
    at.selectbox(key="rd_run").select("run-errors").run()
    _ok(at)
    errors = _table(at, "excerpt")
    assert list(errors["kind"]) == ["json", "json", "payload_md5"]
    assert at.query_params.get("run") == "run-errors"


def test_run_detail_shows_every_metric_of_a_compile(app_at, real_db):
    with open_store(real_db).read() as con:
        run_id, cid = con.execute("SELECT run_id, compile_id FROM compiles WHERE metrics_json IS NOT NULL "
                                  "ORDER BY run_id, compile_id LIMIT 1").fetchone()
    at = app_at(real_db, PAGES["run_detail"], query={"run": run_id, "from": "2000-01-01", "to": "2100-01-01"})
    _ok(at)
    assert not at.json or all("guard_count" not in str(j.value) for j in at.json)
    at.selectbox(key="rd_cid").select(cid).run()
    _ok(at)
    assert any("guard_count" in str(j.value) for j in at.json)
    assert at.query_params.get("cid") == cid


def test_compare_two_runs(app_at, team_db):
    at = app_at(team_db, PAGES["compare"])
    at.segmented_control(key="cmp_mode").set_value("Two runs").run()
    _ok(at)
    at.selectbox(key="cmp_run_a").select("run-errors")
    at.selectbox(key="cmp_run_b").select("run-storm").run()
    _ok(at)
    breaks = _table(at, "status", "per_run_a")
    assert "new" in set(breaks["status"])            # the .item() break only exists in the recent run
    rec = _table(at, "recompiles_a")
    assert rec.loc[rec["function"] == "forward", "delta"].iloc[0] > 0
    assert at.query_params.get("run_b") == "run-storm"


def test_upload_ingests_a_real_trace_and_recognises_the_duplicate(app_at, tmp_path):
    db = tmp_path / "up" / "compilewatch.duckdb"
    from compilewatch.store import open_store

    open_store(db)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "graph_break_recompile.log.gz"
    at = app_at(db, PAGES["upload"])
    _ok(at)
    at.file_uploader(key="up_files").upload(log.name, log.read_bytes())
    at.text_input(key="up_model").input("toy")
    at.run()
    at.button(key="up_go").click().run()
    _ok(at)
    result = _table(at, "duplicate")
    assert list(result["status"]) == ["stored"] and result["events"].iloc[0] > 0
    # the uploader was emptied (its bytes freed on the server); the same file again is a duplicate
    assert not at.file_uploader(key="up_files_1").value
    at.file_uploader(key="up_files_1").upload(log.name, log.read_bytes())
    at.run()
    at.button(key="up_go").click().run()
    assert list(_table(at, "duplicate")["duplicate"]) == [True]
    # And the upload is on the hotspots page straight away (the cache keys on data_version).
    at.query_params.clear()
    at.switch_page(PAGES["hotspots"]).run()
    _ok(at)
    assert any("item()" in str(w) for w in at.dataframe(key="hs_table").value["what"])
