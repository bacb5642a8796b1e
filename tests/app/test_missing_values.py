"""Missing values show as a dash, small ratios with significant digits. (Seen: "None"/"nan" in
tables and run selectors for runs of loose logs, which say nothing of their model; a speedup of
0.0004 printed as "0.000×".) The pages run on real logs ingested as they come."""
from __future__ import annotations

import math

import pandas as pd

from compilewatch.app import ui


def test_ratios_keep_significant_digits_and_missing_is_a_dash():
    assert ui.fmt_value(0.0004, "×") == "0.0004×"
    assert ui.fmt_value(0.000412345, "×") == "0.000412×"
    assert ui.fmt_value(1.23456, "×") == "1.23×"
    assert ui.fmt_value(None, "×") == ui.fmt_value(math.nan, "×") == ui.fmt_value(pd.NA) == "–"
    assert ui.dash(None) == ui.dash(math.nan) == ui.dash("") == "–" and ui.dash("resnet50") == "resnet50"
    assert ui.RATIO % 0.0004 == "0.0004×"


def _texts(frame: pd.DataFrame) -> list[str]:
    return [str(v) for c in frame.columns
            if frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c]) for v in frame[c]]


def test_run_pages_show_no_none_or_nan_for_runs_of_loose_logs(app_at, real_db):
    from compilewatch.store import open_store

    with open_store(real_db).read() as con:
        a, b = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE model IS NULL ORDER BY run_id LIMIT 2").fetchall()]
        old = con.execute("SELECT run_id FROM graph_breaks WHERE gb_type IS NULL ORDER BY run_id LIMIT 1").fetchall()[0][0]
    window = {"from": "2000-01-01", "to": "2100-01-01"}
    at = app_at(real_db, "views/compare.py", query={**window, "run": a, "run_b": b})
    assert not at.exception
    labels = at.selectbox(key="cmp_run_a").options
    assert labels and not any("None" in s or "nan" in s for s in labels), labels
    at = app_at(real_db, "views/run_detail.py", query={**window, "run": old})   # a pre-2.7 log: no gb_type
    assert not at.exception
    assert not any(("None" in s or "nan" in s) for s in at.selectbox(key="rd_run").options)
    cells = [s for d in at.dataframe for s in _texts(d.value)]
    assert "–" in cells and "None" not in cells and "nan" not in cells
