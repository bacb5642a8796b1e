"""The page queries on a team's store built from real logs (conftest.team_db): what the weekly
review must surface, checked against what the logs contain, and the contract every query keeps (a
DataFrame, parameterised, no streamlit).

The facts used, all from the ingested logs:
- llama-pretrain v2-breaks (sample_logs, H100 and H200, 2026-11-23): a new `Tensor.item()` break at
  train_llama.py:155 and a recompile storm in `lm_loss_warmup` that hits torch's recompile_limit (8);
- the bench runs of 2026-11-22 ran the problem models on torch 2.13.0+cpu and 2.14.1+cu130 (CPU);
- tests/fixtures/trace/scripts/graph_break_recompile.py ran on 2026-11-22 and again on 2026-11-25
  (model toy-job), so its breaks recur; labelled-job's `.item()` break first appears on 2026-11-24;
- tlparse's corrupted trace holds one record whose payload fails its md5.
"""
from __future__ import annotations

import ast
import inspect
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.app.filters import Filters
from compilewatch.app.queries import (common, compare, cudagraphs, hotspots, overview, recompiles, run_detail,
                                      speedups, upload)
from compilewatch.app.queries import review as review_q
from compilewatch.store import open_store

ALL = Filters(start=date(2025, 1, 1), end=date(2026, 11, 26))     # the newest runs: the NCCL jobs, 11-26
DAYS_23_24 = Filters(start=date(2026, 11, 23), end=date(2026, 11, 24))     # the day before: 21-22
# A week ending 2026-11-30 counts as new what was first seen from 11-24 on: the toy-job breaks
# (first seen 11-22, again 11-25) are old, labelled-job's `.item()` break (11-24) is new.
LATE_WEEK = Filters(start=date(2026, 11, 24), end=date(2026, 11, 30))
ITEM_BREAK = "Unsupported Tensor.item() call with capture_scalar_outputs=False @ train_llama.py:155"
PRINT_BREAK = "Failed to trace builtin operator @ graph_break_recompile.py:11"
MODULES = (common, compare, hotspots, overview, recompiles, run_detail, speedups, upload, review_q)
HELPERS = {"geomean", "geomean_sums", "mean_sums", "run_where", "runs_cte", "df", "mode", "new_since", "storm_run",
           "guard_hint", "per_hardware", "weekly", "misses_frame", "from_cells", "reads_cells"}


@pytest.fixture(scope="module")
def con(team_db):
    with open_store(team_db).read() as c:
        yield c


def _one(con, sql, *params):
    return con.execute(sql, list(params)).fetchone()[0]


def _runs(con, model, label, hardware_like="%"):
    return [r[0] for r in con.execute("SELECT run_id FROM runs WHERE model = ? AND label = ? AND hardware LIKE ? "
                                      "ORDER BY started_at", [model, label, hardware_like]).fetchall()]


def _query_functions():
    for mod in MODULES:
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ == mod.__name__ and not name.startswith("_") and name not in HELPERS:
                yield f"{mod.__name__}.{name}", fn


@pytest.mark.parametrize("name,fn", list(_query_functions()))
def test_every_query_returns_a_frame_for_any_filters(con, name, fn):
    storm = _runs(con, "llama-pretrain", "v2-breaks")[0]
    clean = _runs(con, "llama-pretrain", "v1-clean")[0]
    for f in (DAYS_23_24, ALL.replace(models=("llama-pretrain",), run_id=storm, run_b=clean, version_a="2.13.0+cpu",
                                      version_b="2.14.1+cu130", break_key="x"),
              Filters(start=date(2020, 1, 1), end=date(2020, 1, 2))):
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
    k = overview.kpis(con, DAYS_23_24).set_index("metric")
    days = "SELECT count(*) FROM runs WHERE started_at::date BETWEEN ? AND ?"
    assert k.at["runs", "current"] == _one(con, days, date(2026, 11, 23), date(2026, 11, 24)) > 0
    assert k.at["runs", "previous"] == _one(con, days, date(2026, 11, 21), date(2026, 11, 22)) > 0
    recompiles_in = ("SELECT count(*) FROM recompiles JOIN runs USING (run_id) "
                     "WHERE started_at::date BETWEEN ? AND ?")
    assert k.at["recompiles", "current"] == _one(con, recompiles_in, date(2026, 11, 23), date(2026, 11, 24))
    assert k.at["recompiles", "change_pct"] > 0         # the llama-pretrain storms came on the 23rd
    # Speedups are not blended across hardware: with CPU and GPU runs in the windows there is none.
    assert k.isna().at["geomean_speedup", "current"] and k.isna().at["geomean_speedup", "previous"]
    # On the H200 alone: the bench runs (the only speedups) ran on the 22nd, so only the window before has one.
    h200 = overview.kpis(con, DAYS_23_24.replace(hardware=("NVIDIA H200 ×1",))).set_index("metric")
    assert h200.at["geomean_speedup", "previous"] > 1 and h200.isna().at["geomean_speedup", "current"]


def test_new_break_is_flagged_and_old_ones_are_not(con):
    h = hotspots.hotspots(con, LATE_WEEK).set_index("break_key")
    assert not h.at[PRINT_BREAK, "new_this_week"]                 # first seen 11-22, recurring 11-25
    assert str(h.at[PRINT_BREAK, "first_seen_ever"]).startswith("2026-11-22")
    new = [k for k in h.index if h.at[k, "new_this_week"]]
    # new: first logged in a run of this week, as labelled-job's `.item()` break and the NCCL jobs' (11-26)
    first = dict(con.execute("SELECT gb.break_key, min(coalesce(r.started_at, r.ingested_at))::DATE "
                             "FROM graph_breaks gb JOIN runs r USING (run_id) GROUP BY 1").fetchall())
    assert sorted(new) == sorted(k for k in h.index if first[k] >= LATE_WEEK.start)
    assert "Unsupported Tensor.item() call with capture_scalar_outputs=False @ train_x.py:55" in new
    only_new = hotspots.hotspots(con, LATE_WEEK.replace(only_new=True))
    assert sorted(only_new["break_key"]) == sorted(new)


def test_hotspots_count_what_the_logs_hold_and_filters_narrow(con):
    everything = hotspots.hotspots(con, ALL.replace(limit=100)).set_index("break_key")
    raw = dict(con.execute("SELECT break_key, count(*) FROM graph_breaks GROUP BY 1").fetchall())
    assert everything["occurrences"].to_dict() == raw
    # twice in each of the six v2-breaks runs (three on the H100, three on the H200)
    assert (everything.at[ITEM_BREAK, "occurrences"], everything.at[ITEM_BREAK, "runs"]) == (12, 6)
    llama = hotspots.hotspots(con, ALL.replace(models=("llama-pretrain",)))
    assert list(llama["break_key"]) == [ITEM_BREAK] and set(llama["model_list"]) == {"llama-pretrain"}
    assert hotspots.hotspots(con, ALL.replace(limit=2)).shape[0] == 2
    found = hotspots.hotspots(con, ALL.replace(search="TRAIN_LLAMA.py"))
    assert list(found["user_file"]) == ["/tmp/team/train_llama.py"] and list(found["user_line"]) == [155]


def test_a_break_lists_its_runs_newest_first_with_their_compile_ids(con):
    got = hotspots.hotspot_runs(con, ALL.replace(break_key=ITEM_BREAK))
    raw = con.execute("""
        SELECT gb.run_id, count(*), string_agg(DISTINCT gb.compile_id, ', ' ORDER BY gb.compile_id)
        FROM graph_breaks gb JOIN runs r USING (run_id) WHERE gb.break_key = ?
        GROUP BY gb.run_id, r.started_at ORDER BY r.started_at DESC""", [ITEM_BREAK]).fetchall()
    assert len(raw) == 6
    assert [tuple(r) for r in got[["run_id", "occurrences", "compile_ids"]].itertuples(index=False)] == raw
    assert hotspots.hotspot_runs(con, ALL.replace(break_key="no such break")).empty


def test_storm_is_flagged_with_its_reasons(con):
    s = recompiles.storms(con, ALL)
    top = s.iloc[0]
    assert (top["model"], top["function"], top["storm"]) == ("llama-pretrain", "lm_loss_warmup", True)
    assert top["run_id"] in _runs(con, "llama-pretrain", "v2-breaks")
    # torch's recompile_limit is 8: eight recompiles, then the limit hit
    assert top["recompiles"] == 8 == _one(con, "SELECT count(*) FROM recompiles WHERE run_id = ? AND function = ?",
                                          top["run_id"], "lm_loss_warmup")
    assert top["limit_hits"] == 1 and top["limit_name"] == "recompile_limit"
    assert "hit recompile_limit" in top["why"] and "8 recompiles" in top["why"]
    # A function that recompiled twice and hit no limit is listed, and is no storm.
    calm = s[(s["model"] == "labelled-job") & (s["function"] == "forward")]
    assert len(calm) and not calm["storm"].any()


def test_timeline_defaults_to_the_stormiest_run(con):
    t = recompiles.timeline(con, ALL)
    assert t["run_id"].nunique() == 1
    per_run = dict(con.execute("SELECT run_id, count(*) FROM recompiles GROUP BY 1").fetchall())
    assert per_run[t["run_id"].iloc[0]] == max(per_run.values()) == len(t)
    for function, rows in t.groupby("function"):
        assert list(rows["cumulative"]) == list(range(1, len(rows) + 1)), function
    assert t.groupby("function").size().to_dict()["lm_loss_warmup"] == 8
    assert list(t["t_s"]) == sorted(t["t_s"])


def test_guard_categories_carry_a_fix_hint(con):
    g = recompiles.guard_categories(con, ALL).set_index("category")
    assert "mark_dynamic" in g.at["size_mismatch", "hint"]       # varying_batch / varying_seqlen / llama
    assert "constant" in g.at["constant", "hint"].lower()        # recompile_limit.py's string constants
    assert g["failures"].is_monotonic_decreasing
    raw = _one(con, "SELECT count(*) FROM guard_failures")
    assert g["failures"].sum() == raw


def test_cudagraph_coverage_names_the_hardware_of_every_covered_run(con, monkeypatch):
    """The newest runs that used CUDA graphs, each model named by its hardware because the covered
    runs of the window span several kinds (an H100, an H200, a CPU), however few are listed."""
    full = cudagraphs.coverage_trend(con, ALL)
    assert len(full) > 1 and full["model"].str.contains(" · ").all()
    assert full["run_time"].is_monotonic_decreasing
    monkeypatch.setattr(cudagraphs, "MAX_RUNS", 1)
    pd.testing.assert_frame_equal(cudagraphs.coverage_trend(con, ALL), full.head(1))


def test_version_table_geomean_row_and_sign(con):
    t = speedups.version_table(con, ALL.replace(version_a="2.13.0+cpu", version_b="2.14.1+cu130")).set_index("model")
    # item_branch's compiled step got faster on 2.14.1 (speedup 0.38x -> 0.71x), changing_constant's slower
    assert t.at["item_branch · CPU ×1", "speedup_change_pct"] > 5
    assert t.at["changing_constant · CPU ×1", "speedup_change_pct"] < -5
    assert "geomean (all models)" in t.index
    assert {m.split(" · ")[0] for m in t.index if "·" in m} == {
        "changing_constant", "dynamic_shapes", "item_branch", "mlp", "print_forward", "varying_batch"}


def test_by_version_orders_oldest_first(con):
    versions = list(speedups.by_version(con, ALL)["version"])
    assert versions == ["2.11.0+cu130 · NVIDIA H200 ×1", "2.13.0+cpu · CPU ×1", "2.14.1+cu130 · CPU ×1"]
    labels = set(speedups.by_version(con, ALL.replace(dimension="label"))["version"])
    assert {"default/train · NVIDIA H200 ×1", "default/infer · CPU ×1"} <= labels


def test_compare_runs_new_and_fixed(con):
    clean = _runs(con, "llama-pretrain", "v1-clean", "NVIDIA H100%")[0]
    breaks = _runs(con, "llama-pretrain", "v2-breaks", "NVIDIA H100%")[0]
    f = ALL.replace(run_id=clean, run_b=breaks)
    d = compare.break_diff(con, f).set_index("break_key")
    assert d.at[ITEM_BREAK, "status"] == "new"
    s = compare.summary(con, f).set_index("side")
    assert s.at["B", "limit_hits"] == 1 and s.at["A", "limit_hits"] == 0
    back = compare.break_diff(con, ALL.replace(run_id=breaks, run_b=clean)).set_index("break_key")
    assert back.at[ITEM_BREAK, "status"] != "new"


def test_compare_versions_uses_per_run_rates(con):
    f = ALL.replace(version_a="2.13.0+cpu", version_b="2.14.1+cu130")
    s = compare.summary(con, f).set_index("side")
    assert s.at["A", "runs"] > 0 and s.at["B", "runs"] > 0
    sp = compare.speedup_diff(con, f).set_index("model")
    assert sp.filter(like="item_branch", axis=0)["speedup_change_pct"].iloc[0] > 0


def test_run_detail_pieces(con):
    storm = _runs(con, "llama-pretrain", "v2-breaks")[0]
    f = Filters(run_id=storm)
    m = run_detail.manifest(con, f).iloc[0]
    assert (m["recompiles"], m["limit_hits"]) == (10, 1)   # 8 in lm_loss_warmup, forward and its resume once each
    assert m["compiles"] == _one(con, "SELECT count(*) FROM compiles WHERE run_id = ?", storm)
    assert m["graph_breaks"] == _one(con, "SELECT count(*) FROM graph_breaks WHERE run_id = ?", storm) > 0
    steps = run_detail.step_summary(con, f)
    fwd = steps[(steps["mode"] == "compiled") & (steps["callable"] == "Llama.forward")].set_index("phase")
    assert fwd.at["compile", "median_ms"] > 10 * fwd.at["steady", "median_ms"]
    phases = run_detail.phases(con, f)
    assert len(phases) and list(phases["start_ms"]) == sorted(phases["start_ms"])


def test_run_detail_errors_of_a_corrupted_trace(con, corrupted_run):
    assert run_detail.errors(con, Filters(run_id=corrupted_run))["kind"].tolist() == ["payload_md5"]
