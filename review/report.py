"""Render a Review as a self-contained HTML page (charts as inline SVG, nothing fetched when it
opens) or as Markdown for meeting notes. Computes nothing: every figure comes from the Review."""
from __future__ import annotations

import html
import json
from datetime import datetime, timezone

import altair as alt
import pandas as pd

from compilewatch.core import safetext
from compilewatch.review import wording
from compilewatch.review.metrics import metric as metric_of
from compilewatch.review.regressions import Verdict
from compilewatch.review.weekly import Review

MAX_CHARTS = 40
def _headline(r: Review) -> list[tuple[str, str]]:
    models = r.candidate_runs["model"].nunique() if len(r.candidate_runs) else 0
    hw = r.candidate_runs["hardware"].nunique() if len(r.candidate_runs) else 0
    return [("Candidate runs", f"{len(r.candidate_runs):,}"), ("Baseline runs", f"{len(r.baseline_runs):,}"),
            ("Models", f"{models:,}"), ("Hardware kinds", f"{hw:,}"),
            ("Regressions", f"{len(r.regressions):,}"), ("Suspicious", f"{len(r.suspicious):,}"),
            ("Improvements", f"{len(r.improvements):,}"), ("Change points", f"{len(r.changepoints):,}")]


def verdict_chart(r: Review, v: Verdict) -> alt.Chart | None:
    """Per-run values of the verdict's series, baseline and candidate coloured, the baseline median
    as a rule. One hardware per chart by construction (a verdict belongs to one hardware)."""
    if v.kind or v.baseline is None or v.candidate is None:
        return None
    rows = [{"run": x.run_id[:10], "time": x.run_time, "value": x.value, "side": side}
            for side, s in (("baseline", v.baseline), ("candidate", v.candidate)) for x in s.runs]
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    m = metric_of(v.metric)
    scale = 2 ** 20 if v.unit == "bytes" else 1
    frame["value"] = frame["value"] / scale
    unit = "MiB" if v.unit == "bytes" else v.unit
    colour = alt.Color("side:N", scale=alt.Scale(domain=["baseline", "candidate"], range=["#64748b", "#dc2626"
                       if v.worse else "#16a34a"]), legend=alt.Legend(orient="bottom", title=None))
    points = alt.Chart(frame).mark_point(filled=True, size=70).encode(
        x=alt.X("time:T", title=None, scale=alt.Scale(padding=14)), y=alt.Y("value:Q", title=f"{m.label} ({unit})" if unit else m.label,
                                              scale=alt.Scale(zero=False)),
        color=colour, tooltip=["run", "side", "value"])
    rule = alt.Chart(pd.DataFrame({"y": [v.baseline.median / scale]})).mark_rule(strokeDash=[4, 3], color="#64748b") \
        .encode(y="y:Q")
    return (points + rule).properties(width=420, height=170, title=wording.title(v)[:90])


def _svg(chart: alt.Chart) -> str:
    import vl_convert

    svg = vl_convert.vegalite_to_svg(chart.to_dict())
    return svg[svg.find("<svg"):]


def _esc(x) -> str:
    return html.escape("" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x))


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#0f172a;padding:0 1rem}
h1{margin-bottom:.2rem} h2{border-bottom:1px solid #e2e8f0;padding-bottom:.3rem;margin-top:2rem}
.sub{color:#475569;margin-top:0} .kpis{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.kpi{border:1px solid #e2e8f0;border-radius:.5rem;padding:.5rem .9rem;min-width:7rem}
.kpi b{display:block;font-size:1.4rem} .kpi span{color:#475569;font-size:.85rem}
.v{border:1px solid #e2e8f0;border-left:5px solid #94a3b8;border-radius:.4rem;padding:.6rem .9rem;margin:.8rem 0}
.v.regression{border-left-color:#dc2626} .v.suspicious{border-left-color:#f59e0b} .v.improvement{border-left-color:#16a34a}
.v h3{margin:.1rem 0 .3rem;font-size:1.02rem} .tag{font-size:.75rem;padding:.1rem .45rem;border-radius:.3rem;background:#f1f5f9;margin-right:.4rem}
.v ul{margin:.3rem 0 .3rem 1.1rem;padding:0} .v li{margin:.15rem 0} code{background:#f1f5f9;padding:0 .25rem;border-radius:.2rem;word-break:break-all}
table{border-collapse:collapse;width:100%;font-size:.9rem;margin:.6rem 0} th,td{border-bottom:1px solid #e2e8f0;text-align:left;padding:.3rem .4rem;vertical-align:top}
.chart svg{max-width:100%;height:auto} .muted{color:#64748b}
"""


def _verdict_html(r: Review, v: Verdict, chart_budget: list[int]) -> str:
    items = "".join(f"<li><span class=muted>{_esc(e.kind)}</span> "
                    + (f"<code>{_esc(e.text)}</code>" if e.kind == "command" else _esc(e.text))
                    + (f"<br><span class=muted>hint: {_esc(e.fields.get('hint'))}</span>" if e.fields.get("hint") else "")
                    + "</li>" for e in v.evidence)
    if v.worse and wording.diff_command(v):
        items += f"<li><span class=muted>see what changed</span> <code>{_esc(wording.diff_command(v))}</code></li>"
    chart = ""
    if chart_budget[0] > 0:
        c = verdict_chart(r, v)
        if c is not None:
            chart_budget[0] -= 1
            chart = f"<div class=chart>{_svg(c)}</div>"
    why = (f"<div><b>Cause:</b> {_esc(wording.cause(v))}</div>" if wording.cause(v) else "") + \
        (f"<div class=muted>Costs {_esc(wording.cost(v))}</div>" if wording.cost(v) else "")
    return (f"<div class='v {v.status}'><h3><span class=tag>{wording.STATUS_WORD.get(v.status, v.status)}</span>"
            f"{_esc(wording.title(v))} <span class=muted>{_esc(wording.change(v))}</span></h3>"
            f"{why}<div>{_esc(v.summary)}</div><ul>{items}</ul>{chart}</div>")


def _table_html(frame: pd.DataFrame, columns: dict[str, str]) -> str:
    if frame is None or frame.empty:
        return "<p class=muted>None.</p>"
    head = "".join(f"<th>{_esc(t)}</th>" for t in columns.values())
    body = "".join("<tr>" + "".join(f"<td>{_esc(row.get(c))}</td>" for c in columns) + "</tr>"
                   for row in frame.to_dict("records"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _hint_text(hints) -> str:
    if not isinstance(hints, str) or not hints:
        return ""
    try:
        value = json.loads(hints)
        return " ".join(map(str, value)) if isinstance(value, list) else str(value)
    except ValueError:
        return hints


HOTSPOT_COLUMNS = {"what": "Break", "where": "User code", "count": "Count", "runs": "Runs", "hint": "Fix hint"}
STORM_COLUMNS = {"function": "Function", "model": "Model", "recompiles": "Recompiles", "runs": "Runs",
                 "guard": "Failed guard", "guard_at": "Guarded at", "guard_source": "Guarded source line",
                 "hint": "Fix hint"}
MODEL_COLUMNS = {"model": "Model", "hardware": "Hardware", "baseline_runs": "Baseline runs",
                 "candidate_runs": "Candidate runs", "regressions": "Regressions", "suspicious": "Suspicious",
                 "improvements": "Improvements", "worse": "Worse metrics"}


def to_html(r: Review, title: str = "compilewatch weekly review") -> str:
    """One HTML document with its CSS and its charts (inline SVG) inside: it opens with no network."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    budget = [MAX_CHARTS]
    kpis = "".join(f"<div class=kpi><b>{_esc(v)}</b><span>{_esc(k)}</span></div>" for k, v in _headline(r))
    worse = "".join(_verdict_html(r, v, budget) for v in r.regressions + r.suspicious) or \
        "<p>Nothing got worse beyond the rules and the runs' own noise.</p>"
    better = "".join(_verdict_html(r, v, budget) for v in r.improvements) or "<p>Nothing got better beyond the noise.</p>"
    cps = "".join(f"<li>{_esc(c.model)} · {_esc(c.hardware)}: {_esc(c.summary)}</li>" for c in r.changepoints)
    own = "".join(f"<li>{_esc(n.text)}</li>" for n in r.notes if n.kind == "own_history")
    notes = "".join(f"<li>{_esc(n.text)}</li>" for n in r.notes if n.kind != "own_history")
    hot = r.hotspots.assign(hint=[_hint_text(h) for h in r.hotspots.get("hints", [])]) if len(r.hotspots) else r.hotspots
    rules = r.rules
    method = (f"Baseline: median of its runs. A candidate run is flagged when it is beyond the ratio rule "
              f"(speedup &lt; {rules.speedup_min_ratio}×, compile time &gt; {rules.compile_time_max_ratio}×, step / "
              f"iteration time &gt; {rules.step_time_max_ratio}× / {rules.iteration_time_max_ratio}×, peak memory &gt; "
              f"{rules.peak_memory_max_ratio}×, event counts past the baseline's range), outside the baseline's range "
              f"and more than {rules.noise_sigmas:g} run-to-run standard deviations from the baseline median. "
              f"{rules.consecutive} flagged runs in a row: regression; fewer: suspicious; a lone candidate run is "
              f"judged against the baseline's spread. Hardware is never mixed: each model is judged per hardware. "
              f"Change points: ruptures PELT confirmed by a Welch t-test (p ≤ {rules.changepoint_max_pvalue}).")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body>
<h1>{_esc(title)}</h1>
<p class=sub>Candidate: <b>{_esc(r.candidate)}</b> · Baseline: <b>{_esc(r.baseline)}</b> · generated {now}</p>
<div class=kpis>{kpis}</div>
<h2 id=worse>Got worse</h2>{worse}
<h2 id=better>Got better</h2>{better}
<h2 id=changepoints>Since when: change points</h2>{f'<ul>{cps}</ul>' if cps else '<p class=muted>No confirmed change point.</p>'}
{f'<h2 id=own>Judged against their previous version</h2><ul>{own}</ul>' if own else ''}
{f'<h2 id=notes>Not compared</h2><ul>{notes}</ul>' if notes else ''}
<h2 id=hotspots>Top graph-break hotspots (candidate)</h2>{_table_html(hot, HOTSPOT_COLUMNS)}
<h2 id=storms>Top recompiling functions (candidate)</h2>{_table_html(r.storms, STORM_COLUMNS)}
<h2 id=models>Per model and hardware</h2>{_table_html(r.per_model(), MODEL_COLUMNS)}
<h2 id=method>Method</h2><p class=muted>{method}</p>
</body></html>
"""


def _md_cell(x) -> str:
    # log content is data: escaped so a reason holding a link, image or HTML shows as text, and no
    # more, so that the report also reads cleanly unrendered (a terminal, an e-mail, a chat)
    return safetext.markdown_prose(x)


def _md_table(frame: pd.DataFrame, columns: dict[str, str]) -> str:
    if frame is None or frame.empty:
        return "_None._\n"
    out = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_md_cell(row.get(c)) for c in columns) + " |" for row in frame.to_dict("records")]
    return "\n".join(out) + "\n"


def _md_verdict(v: Verdict) -> str:
    lines = [f"- **{wording.STATUS_WORD.get(v.status, v.status)}: {_md_cell(wording.title(v))}** ({wording.change(v)}) — {_md_cell(v.summary)}"]
    if wording.cause(v):
        lines.append(f"  - **cause**: {_md_cell(wording.cause(v))}")
    if wording.cost(v):
        lines.append(f"  - costs {_md_cell(wording.cost(v))}")
    for e in v.evidence:
        text = _md_cell(e.text)
        lines.append(f"  - {e.kind}: {text}" + (f" — hint: {_md_cell(e.fields['hint'])}" if e.fields.get("hint") else ""))
    if v.worse and wording.diff_command(v):
        lines.append(f"  - see what changed: `{wording.diff_command(v)}`")
    return "\n".join(lines)


def to_markdown(r: Review, title: str = "compilewatch weekly review") -> str:
    """The same review as Markdown that pastes into meeting notes (no charts; figures in text)."""
    head = " · ".join(f"{k}: **{_md_cell(v)}**" for k, v in _headline(r))
    worse = "\n".join(_md_verdict(v) for v in r.regressions + r.suspicious) or "Nothing got worse beyond the rules and the noise."
    better = "\n".join(_md_verdict(v) for v in r.improvements) or "Nothing got better beyond the noise."
    cps = "\n".join(f"- {_md_cell(c.model)} · {_md_cell(c.hardware)}: {_md_cell(c.summary)}" for c in r.changepoints) or "No confirmed change point."
    own = "\n".join(f"- {_md_cell(n.text)}" for n in r.notes if n.kind == "own_history")
    notes = "\n".join(f"- {_md_cell(n.text)}" for n in r.notes if n.kind != "own_history")
    hot = r.hotspots.assign(hint=[_hint_text(h) for h in r.hotspots.get("hints", [])]) if len(r.hotspots) else r.hotspots
    parts = [f"# {title}", "", f"Candidate: **{_md_cell(r.candidate)}** · Baseline: **{_md_cell(r.baseline)}**", "", head, "",
             "## Got worse", "", worse, "", "## Got better", "", better, "", "## Since when: change points", "", cps, ""]
    if own:
        parts += ["## Judged against their previous version", "", own, ""]
    if notes:
        parts += ["## Not compared", "", notes, ""]
    parts += ["## Top graph-break hotspots (candidate)", "", _md_table(hot, HOTSPOT_COLUMNS),
              "## Top recompiling functions (candidate)", "", _md_table(r.storms, STORM_COLUMNS),
              "## Per model and hardware", "", _md_table(r.per_model(), MODEL_COLUMNS)]
    return "\n".join(parts)


def render(r: Review, path_or_format: str) -> str:
    """HTML for a name ending in .html/.htm (or "html"), Markdown for .md (or "md")."""
    p = path_or_format.lower()
    if p.endswith((".html", ".htm")) or p == "html":
        return to_html(r)
    if p.endswith((".md", ".markdown")) or p == "md":
        return to_markdown(r)
    from compilewatch.core.errors import SpecError
    raise SpecError(f"cannot tell the report format from '{path_or_format}'", "name the file *.html or *.md")
