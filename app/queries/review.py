"""The weekly review's verdicts for the dashboard: the candidate is the picked window, the baseline
the window before it (or the team's pinned baseline), judged per model and hardware by ``review``."""
from __future__ import annotations

from datetime import datetime, time, timedelta

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df, run_where
from compilewatch.review import wording
from compilewatch.review.baseline import Window
from compilewatch.review.gate import assemble
from compilewatch.review.regressions import Verdict
from compilewatch.review.weekly import Review

COLUMNS = ["status", "model", "hardware", "metric", "subject", "change", "summary", "evidence", "command",
           "baseline_run", "candidate_run", "break_key", "function", "headline", "diff_command", "cause",
           "cost_s", "cost", "frame"]


def _windows(f: Filters) -> tuple[Window, Window]:
    prev = f.previous_window()
    def day(d, plus=0):
        return datetime.combine(d + timedelta(days=plus), time.min) if d else None
    return Window(day(prev.start), day(prev.end, 1)), Window(day(f.start), day(f.end, 1))


def weekly(con, f: Filters, with_changepoints: bool = False) -> Review:
    """The Review behind the Overview (no change points: the page does not show them) and, with
    them, its report download. The sidebar's filters (models, torch versions, labels, hardware) hold
    on both sides; the dates pick the windows."""
    ids = None
    if f.models or f.torch_versions or f.labels or f.hardware:
        where, params = run_where(f, use_time=False)
        ids = list(df(con, f"SELECT r.run_id FROM runs r WHERE {where}", params)["run_id"])
    return assemble(con, windows=_windows(f), with_changepoints=with_changepoints, run_ids=ids,
                    with_hotspots=with_changepoints)


def _row(v: Verdict) -> dict:
    ev = {e.kind: e for e in v.evidence}
    flagged = list(v.flagged) or (v.candidate.run_ids[-1:] if v.candidate else [])
    base = v.baseline.run_ids if v.baseline else []
    return {"status": v.status, "model": v.model, "hardware": v.hardware,
            "metric": wording.what(v), "subject": v.subject if not v.kind else "",
            "change": wording.change(v), "summary": v.summary,
            "evidence": [(e.kind, e.text, e.fields.get("hint")) for e in v.evidence if e.kind not in ("command", "run")],
            "command": ev["command"].text if "command" in ev else None,
            "baseline_run": base[-1] if base else None, "candidate_run": flagged[-1] if flagged else None,
            "break_key": (ev["graph_break"].fields.get("break_key") if "graph_break" in ev else None),
            "function": (ev["recompile"].fields.get("function") if "recompile" in ev
                         else ev["limit_hit"].fields.get("function") if "limit_hit" in ev else None),
            "headline": None, "diff_command": wording.diff_command(v) if v.worse else None,
            "cause": wording.cause(v), "cost_s": v.cost_s, "cost": wording.cost(v),
            "frame": (v.cause.frame or {}).get("co_name") if v.cause else None}


def verdicts(con, f: Filters) -> pd.DataFrame:
    """One row per regression, suspicious change or improvement, worst first, with what the page
    links to: a baseline and a candidate run (Compare, Run detail), the break key (hotspot), the
    recompiling function (storm), and the command that reproduces the candidate run. Then one row
    per model the review did not compare because the two sides ran on different hardware (status
    "not_compared") or judged against its own previous version (status "own_history"), the reason
    in summary."""
    r = weekly(con, f)
    judged = r.regressions + r.suspicious + r.improvements
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in judged:
        groups.setdefault((v.model, v.hardware), []).append(v)
    rows = []
    for (model, hw), vs in groups.items():
        for v in vs:
            rows.append({**_row(v), "headline": wording.headline(model, hw, vs)})
    rows += [{"status": "not_compared" if n.kind == "different_hardware" else n.kind, "model": n.model,
              "hardware": n.hardware, "summary": n.text}
             for n in r.notes if n.kind in ("different_hardware", "own_history")]
    return pd.DataFrame(rows, columns=COLUMNS)


def report_html(con, f: Filters) -> pd.DataFrame:
    """The HTML report of this view, change points included, one cell (the cache stores DataFrames)."""
    from compilewatch.review.report import to_html
    return pd.DataFrame({"html": [to_html(weekly(con, f, with_changepoints=True))]})
