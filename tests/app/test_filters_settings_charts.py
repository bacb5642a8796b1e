"""Filters round-trip through the URL, settings are documented, every chart has a title, axis
titles and tooltips, and the first-start bootstrap ingests sample_logs once."""
from __future__ import annotations

import threading
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.app import bootstrap, charts
from compilewatch.app import dashboard_settings as settings
from compilewatch.app.filters import Filters, from_params, to_params
from compilewatch.store import open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_filters_round_trip_through_the_query_string():
    f = Filters(models=("a", "b"), torch_versions=("2.6.0",), labels=("main",), start=date(2026, 1, 2),
                end=date(2026, 1, 8), run_id="r1", run_b="r2", dimension="label", version_a="x", version_b="y",
                break_key="k|f.py:1", function="forward", search="item", only_new=True)
    assert from_params(to_params(f)) == f
    assert to_params(Filters()) == {}


def test_bad_query_values_are_ignored_not_raised():
    f = from_params({"from": "yesterday", "to": "2026-13-40", "by": "drop table", "model": ["a", ""]})
    assert (f.start, f.end, f.dimension, f.models) == (None, None, "torch_version", ("a",))
    f = from_params({"from": "2026-11-20", "to": "2026-11-01"})
    assert (f.start, f.end) == (date(2026, 11, 1), date(2026, 11, 20))


def test_previous_window_has_the_same_length():
    f = Filters(start=date(2026, 11, 14), end=date(2026, 11, 20))
    p = f.previous_window()
    assert (p.start, p.end) == (date(2026, 11, 7), date(2026, 11, 13))


def test_every_setting_is_declared_with_help():
    from compilewatch.core.settings import SETTINGS

    assert len({s.name for s in SETTINGS}) == len({s.env for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:
        # a default may be empty (no DuckLake data path unless asked), never undeclared
        assert s.name and s.env.startswith("COMPILEWATCH_") and isinstance(s.default, str) and len(s.help) > 30


def test_db_path_setting_prefers_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("COMPILEWATCH_DB", raising=False)
    assert str(settings.db_path()) == ".compilewatch/compilewatch.duckdb"
    monkeypatch.setenv("COMPILEWATCH_DB", str(tmp_path / "x.duckdb"))
    assert settings.db_path() == tmp_path / "x.duckdb"


def _walk(spec):
    if isinstance(spec, dict):
        yield spec
        for v in spec.values():
            yield from _walk(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk(v)


SAMPLES = {
    "daily_activity": pd.DataFrame({"day": pd.to_datetime(["2026-11-01"]), "win": ["current"], "runs": [1],
                                    "graph_breaks": [3], "recompiles": [2]}),
    "hotspot_bars": pd.DataFrame({"break_key": ["k"], "gb_type": ["t"], "reason": ["r"], "user_file": ["/a/b.py"], "user_line": [3],
                                  "new_this_week": [True], "occurrences": [5], "runs": [2], "models": [1],
                                  "torch_versions": ["2.6"], "first_seen": pd.to_datetime(["2026-11-01"]),
                                  "last_seen": pd.to_datetime(["2026-11-02"])}),
    "hotspot_trend": pd.DataFrame({"period": pd.to_datetime(["2026-11-01"]), "label": ["t"], "occurrences": [3]}),
    "recompile_timeline": pd.DataFrame({"run_id": ["r"], "function": ["f"], "compile_id": ["0/1"], "seq": [1],
                                        "t_s": [0.0], "cumulative": [1], "category": ["dtype"], "reason": ["x"]}),
    "recompiles_per_day": pd.DataFrame({"day": pd.to_datetime(["2026-11-01", "2026-11-01"]),
                                        "category": ["dtype", "all recompiles"], "recompiles": [2, 2]}),
    "guard_category_bars": pd.DataFrame({"category": ["dtype"], "failures": [2], "runs": [1], "functions": [1],
                                         "top_guard": ["g"]}),
    "trend": pd.DataFrame({"model": ["m"], "period": pd.to_datetime(["2026-11-01"]), "speedup": [1.2], "compile_s": [3.0],
                           "memory_ratio": [1.1], "runs": [1], "torch_versions": ["2.6"], "labels": ["main"]}),
    "by_version": pd.DataFrame({"version": ["2.6"], "geomean_speedup": [1.2], "compile_s": [3.0], "memory_ratio": [1.1],
                                "models": [1], "runs": [1]}),
    "phase_timeline": pd.DataFrame({"compile_id": ["0/0"], "name": ["x"], "start_ms": [0.0], "end_ms": [5.0],
                                    "duration_ms": [5.0]}),
    "step_times": pd.DataFrame({"callable": ["f"], "mode": ["compiled"], "step": [0], "phase": ["steady"],
                                "duration_ms": [3.0]}),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_chart_has_title_axis_titles_and_tooltips(name):
    spec = getattr(charts, name)(SAMPLES[name]).to_dict()
    assert spec.get("title"), name
    encodings = [d["encoding"] for d in _walk(spec) if isinstance(d.get("encoding"), dict)]
    assert any("tooltip" in e for e in encodings), name
    for e in encodings:
        for channel in ("x", "y"):
            field = e.get(channel)
            if isinstance(field, dict) and "field" in field and "title" not in field and e is encodings[0]:
                pytest.fail(f"{name}: {channel} axis has no title")


def test_timeline_highlights_the_picked_function():
    frame = pd.concat([SAMPLES["recompile_timeline"], SAMPLES["recompile_timeline"].assign(function="g")])
    spec = charts.recompile_timeline(frame, highlight="g").to_dict()
    assert "function g" in spec["title"] and "opacity" in str(spec)
    assert "function g" not in charts.recompile_timeline(frame, highlight="nope").to_dict()["title"]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_chart_of_nothing_says_so(name):
    empty = SAMPLES[name].iloc[0:0]
    spec = getattr(charts, name)(empty).to_dict()
    assert spec.get("title")


def test_daily_activity_of_runs_without_events_says_so_and_counts_are_whole(sample_db):
    """The Overview's per-day chart from the sample bundles: a model whose runs logged no graph break
    or recompile gets a sentence, not empty bars over an axis reading "0.000000"; one with events
    gets bars on whole-number ticks."""
    from compilewatch.app.queries import overview
    with open_store(sample_db).read() as con:
        per_model = con.execute("SELECT r.model, sum(coalesce(t.graph_breaks, 0) + coalesce(t.recompiles, 0)) "
                                "FROM runs r LEFT JOIN rollup_run_totals t USING (run_id) GROUP BY ALL").fetchall()
        quiet = next(m for m, n in per_model if n == 0)
        busy = next(m for m, n in per_model if n > 0)
        frames = {m: overview.daily(con, Filters(models=(m,))) for m in (quiet, busy)}
    assert len(frames[quiet]) and frames[quiet][["graph_breaks", "recompiles"]].to_numpy().sum() == 0
    spec = charts.daily_activity(frames[quiet]).to_dict()
    assert "no graph breaks or recompiles" in str(spec) and "bar" not in str(spec.get("mark"))
    spec = charts.daily_activity(frames[busy]).to_dict()
    assert spec["mark"]["type"] == "bar" and spec["encoding"]["y"]["axis"]["tickMinStep"] == 1


def test_bootstrap_ingests_sample_logs_once_across_concurrent_sessions(tmp_path):
    samples = tmp_path / "sample_logs"
    samples.mkdir()
    (samples / "README.md").write_text("notes")
    for name in ("graph_break_recompile.log.gz", "recompile_limit.log.gz"):
        (samples / name).write_bytes((FIXTURES / "trace" / name).read_bytes())
    store = open_store(tmp_path / "db" / "compilewatch.duckdb")
    messages = []
    threads = [threading.Thread(target=lambda: messages.append(bootstrap.ensure_sample_data(store, samples)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(m is not None for m in messages) == 1
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 2
        assert con.execute("SELECT count(*) FROM graph_breaks").fetchone()[0] > 0
    assert bootstrap.ensure_sample_data(store, samples) is None   # never again, even if emptied later


def test_bootstrap_skips_a_store_that_has_runs(tmp_path, team_db):
    samples = tmp_path / "s"
    samples.mkdir()
    (samples / "x.log").write_text("hello")
    import shutil

    db = tmp_path / "copy" / "compilewatch.duckdb"
    db.parent.mkdir()
    shutil.copy(team_db, db)
    assert bootstrap.ensure_sample_data(open_store(db), samples) is None
