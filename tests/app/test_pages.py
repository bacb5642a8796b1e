"""AppTest for every page: renders with data (a team's store of real bundles, and real logs parsed
by the loader), renders with an empty database, and a filter interaction changes what is shown.
What the tests expect is what the ingested logs hold (see test_queries.py's docstring).

Run: .venv/bin/python -m pytest tests/app
"""
from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from compilewatch.store import open_store

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
        "hotspots": lambda: "Unsupported Tensor.item() call with capture_scalar_outputs=False"
                            in set(at.dataframe[0].value["what"]),
        "recompiles": lambda: "lm_loss_warmup" in set(at.dataframe[0].value["function"]),
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
def _run_of(db, model, label, hardware_like="%"):
    with open_store(db).read() as con:
        return con.execute("SELECT run_id FROM runs WHERE model = ? AND label = ? AND hardware LIKE ? "
                           "ORDER BY started_at LIMIT 1", [model, label, hardware_like]).fetchone()[0]


def test_overview_model_filter_changes_kpis_and_url(app_at, team_db):
    at = app_at(team_db)
    runs_all = at.metric[0].value
    at.multiselect(key="g_models").select("llama-pretrain").run()
    _ok(at)
    assert at.metric[0].value == "12" != runs_all                # 3 runs x 2 versions x H100, H200
    assert at.query_params.get("model") in ("llama-pretrain", ["llama-pretrain"])
    # the review's verdicts, one block per model and hardware led by its headline: v2-breaks brought
    # the .item() break at train_llama.py:155 and the lm_loss_warmup storm, on each GPU kind
    moved = _tables(at, "status", "metric", "evidence")
    heads = [shown(m.value) for m in at.markdown if shown(m.value).startswith("**llama-pretrain on")]
    assert moved and len(heads) == len(moved) == 2, heads
    assert all("got worse" in h and "Tensor.item()" in h for h in heads), heads
    for worse in moved:
        assert {"New graph break", "Newly recompiling function", "New recompile-limit hit"} <= set(worse["metric"])
        assert (worse["metric"].str.startswith("Iteration time") & (worse["status"] == "regression")).any()
        assert worse["compare"].notna().any() and worse["run"].notna().any()


def test_reset_filters_clears_the_selection(app_at, team_db):
    at = app_at(team_db, query={"model": "tinylm", "from": "2026-11-01", "to": "2026-11-07"})
    at.button(key="g_reset").click().run()
    _ok(at)
    assert at.multiselect(key="g_models").value == []
    with open_store(team_db).read() as con:   # the store's last week: the 7 days up to its newest run
        newest = con.execute("SELECT max(coalesce(started_at, ingested_at))::DATE FROM runs").fetchone()[0]
    assert at.date_input(key="g_window_7").value == (newest - timedelta(days=6), newest)
    assert "model" not in at.query_params


def test_overview_opens_from_a_pasted_link(app_at, team_db):
    at = app_at(team_db, query={"model": "tinylm", "from": "2026-11-01", "to": "2026-11-07"})
    _ok(at)
    assert at.multiselect(key="g_models").value == ["tinylm"]
    assert at.date_input(key="g_window_7").value == (date(2026, 11, 1), date(2026, 11, 7))
    assert at.query_params.get("from") == "2026-11-01"


def test_hotspots_new_this_week_toggle(app_at, team_db):
    # the week ending 11-30 on the CPU the toy jobs ran on: the toy-job breaks (first seen 11-22) are
    # old, labelled-job's is new (the page shows one hardware at a time; the newest runs are on GPUs)
    with open_store(team_db).read() as con:   # each break's user frame as the log wrote it, and its first day
        hw = con.execute("SELECT hardware FROM runs WHERE model = 'labelled-job' LIMIT 1").fetchone()[0]
        first = dict(con.execute("""
            SELECT gb.user_file || ':' || gb.user_line, min(coalesce(r.started_at, r.ingested_at))::DATE
            FROM graph_breaks gb JOIN runs r USING (run_id) WHERE r.hardware = ? GROUP BY 1""", [hw]).fetchall())
        in_week = {r[0] for r in con.execute("""
            SELECT DISTINCT gb.user_file || ':' || gb.user_line FROM graph_breaks gb JOIN runs r USING (run_id)
            WHERE r.hardware = ? AND coalesce(r.started_at, r.ingested_at)::DATE BETWEEN DATE '2026-11-24'
                  AND DATE '2026-11-30'""", [hw]).fetchall()}
    at = app_at(team_db, PAGES["hotspots"], query={"from": "2026-11-24", "to": "2026-11-30", "hw": hw})
    labelled = next(loc for loc in first if loc.endswith("/labelled-job/train_x.py:55"))
    before = at.dataframe(key="hs_table").value
    assert set(before["location"]) == in_week == {"/tmp/team/graph_break_recompile.py:11",
                                                  "/tmp/team/graph_break_recompile.py:12", labelled}
    at.toggle(key="hs_new").set_value(True).run()
    _ok(at)
    after = at.dataframe(key="hs_table").value
    assert list(after["location"]) == [labelled] and first[labelled] >= date(2026, 11, 24)
    assert at.query_params.get("new") == "1"


def test_hotspots_search_and_break_link(app_at, team_db):
    key = "Failed to trace builtin operator @ graph_break_recompile.py:11"
    at = app_at(team_db, PAGES["hotspots"], query={"break": key, "from": "2026-11-24", "to": "2026-11-30"})
    _ok(at)
    # The linked break's detail: its hint and the runs it occurred in.
    assert "Avoid calling builtin `print`" in _texts(at)
    assert "first seen 2026-11-22" in _texts(at) and "new this week" not in _texts(at)
    assert len(_table(at, "compile_ids")) > 0
    at = app_at(team_db, PAGES["hotspots"])
    at.text_input(key="hs_search").input("TRAIN_LLAMA").run()
    _ok(at)
    assert set(at.dataframe(key="hs_table").value["location"]) == {"/tmp/team/train_llama.py:155"}


def test_recompiles_only_storms_and_timeline(app_at, team_db):
    at = app_at(team_db, PAGES["recompiles"])
    table = at.dataframe(key="rc_table").value
    assert not table["storm"].all()
    # with no row selected, the timeline says whose it is: the run with the most recompiles
    assert "the run with the most recompiles" in _texts(at)
    at.toggle(key="rc_only_storms").set_value(True).run()
    _ok(at)
    storms = at.dataframe(key="rc_table").value
    assert storms["storm"].all() and {"llama-pretrain", "varying_batch"} <= set(storms["model"])
    assert "hit recompile_limit" in set(storms["why"].str.split(";").str[0])
    # The fix hint for the storms' size guards is on the page.
    assert "mark_dynamic" in _texts(at)
    # The limit warning names the functions that hit the limit, each with its count of runs.
    hit = table[table["limit_hits"] > 0].groupby("function")["run_id"].nunique()
    warning = shown(at.warning[0].value)
    assert "hit the recompile limit" in warning and len(hit) >= 2
    for fn, runs in hit.items():
        assert f"**{fn}** ({runs} run{'' if runs == 1 else 's'})" in warning


def test_trends_dimension_switch(app_at, team_db):
    at = app_at(team_db, PAGES["trends"])
    assert set(_table(at, "geomean_speedup")["version"]) == {
        "2.11.0+cu130 · NVIDIA H200 ×1", "2.13.0+cpu · CPU ×1", "2.14.1+cu130 · CPU ×1"}
    at.segmented_control(key="tr_dim").set_value("label").run()
    _ok(at)
    assert "reduce-overhead/train · NVIDIA H200 ×1" in set(_table(at, "geomean_speedup")["version"])
    assert at.query_params.get("by") == "label"


def test_trends_version_table_flags_item_branch_gain(app_at, team_db):
    at = app_at(team_db, PAGES["trends"], query={"a": "2.13.0+cpu", "b": "2.14.1+cu130", "from": "2026-11-22",
                                                 "to": "2026-11-22"})
    _ok(at)
    table = _table(at, "speedup_change_pct")
    row = table[table["model"] == "item_branch · CPU ×1"].iloc[0]
    assert row["speedup_change_pct"] > 5                     # 0.38x -> 0.71x in the bench rows


def test_run_detail_pick_run_shows_its_errors(app_at, team_db, corrupted_run):
    corrupted = corrupted_run
    at = app_at(team_db, PAGES["run_detail"], query={"from": "2025-01-01", "to": "2026-11-25"})
    assert not _tables(at, "excerpt")
    at.selectbox(key="rd_run").select(corrupted).run()
    _ok(at)
    errors = _table(at, "excerpt")
    assert list(errors["kind"]) == ["payload_md5"]
    assert at.query_params.get("run") == corrupted


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
    clean = _run_of(team_db, "llama-pretrain", "v1-clean", "NVIDIA H100%")
    breaks = _run_of(team_db, "llama-pretrain", "v2-breaks", "NVIDIA H100%")
    at = app_at(team_db, PAGES["compare"])
    at.segmented_control(key="cmp_mode").set_value("Two runs").run()
    _ok(at)
    at.selectbox(key="cmp_run_a").select(clean)
    at.selectbox(key="cmp_run_b").select(breaks).run()
    _ok(at)
    breaks_table = _table(at, "status", "per_run_a")
    assert "new" in set(breaks_table["status"])            # the .item() break only exists in v2-breaks
    rec = _table(at, "recompiles_a")
    assert rec.loc[rec["function"] == "lm_loss_warmup", "delta"].iloc[0] == 8
    assert at.query_params.get("run_b") == breaks


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
