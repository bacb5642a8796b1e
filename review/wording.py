"""How a verdict is worded, once, for every place a person reads it: `compilewatch check`, the
report (HTML and Markdown) and the Overview. Detection (regressions.py) decides; this module only
says. A graph break that went away reads "gone" everywhere, a change from zero reads "0 → 3".
"""
from __future__ import annotations

import math
from pathlib import PurePath

from compilewatch.review.metrics import fmt
from compilewatch.review.metrics import metric as metric_of
from compilewatch.review.regressions import IMPROVEMENT, REGRESSION, SUSPICIOUS, Verdict

STATUS_WORD = {REGRESSION: "Regression", SUSPICIOUS: "Suspicious", IMPROVEMENT: "Improvement"}
KIND_WORDS = {"new_graph_break": "New graph break", "new_recompiling_function": "Newly recompiling function",
              "new_guard_category": "New guard-failure category", "new_limit_hit": "New recompile-limit hit",
              "fixed_graph_break": "Graph break gone", "fixed_recompiling_function": "No longer recompiling",
              "fixed_guard_category": "Guard-failure category gone", "fixed_limit_hit": "Limit hit gone",
              "new_cudagraph_skip": "New CUDA-graph skip", "fixed_cudagraph_skip": "CUDA-graph skip gone"}


def what(v: Verdict) -> str:
    """The metric in words ("Compile time (incl. recompiles) [warm cache]", "New graph break")."""
    if v.kind:
        return KIND_WORDS.get(v.kind, v.kind.replace("_", " "))
    subject = f" [{v.subject}]" if v.subject else ""
    return metric_of(v.metric).label + subject


def title(v: Verdict) -> str:
    return f"{v.model} · {v.hardware} · {what(v)}"


def change(v: Verdict) -> str:
    """The size of the change: "+47.3%", "0 → 3" (from zero: no ratio), "new", "gone", or "–"."""
    if v.kind:
        return "new" if v.kind.startswith("new_") else "gone"
    b = v.baseline.median if v.baseline else None
    c = v.candidate.median if v.candidate else None
    if v.change is None or math.isinf(v.change) or (b == 0 and c is not None):
        if b is not None and c is not None:
            return f"{fmt(b, v.unit)} → {fmt(c, v.unit)}"
        return "–"
    return f"{100 * v.change:+.1f}%"


def diff_command(v: Verdict) -> str | None:
    """`compilewatch diff BASELINE_RUN CANDIDATE_RUN` for a verdict: the newest baseline run against
    the candidate run it flagged, where both sides have runs ("see what changed" in the compiler)."""
    base = v.baseline.run_ids if v.baseline else []
    cand = list(v.flagged) or (v.candidate.run_ids if v.candidate else [])
    if not base or not cand:
        return None
    return f"compilewatch diff {base[-1]} {cand[-1]}"


def cause(v: Verdict) -> str | None:
    """Why it moved, in one sentence ("Block.forward compiles 1.0 s → 36 s: Inductor 30 s longer
    (cache warm in the baseline, warm in the candidate); …"), where the store could tell."""
    return v.cause.text if v.cause and v.cause.text else None


def cost(v: Verdict) -> str | None:
    """What the verdict costs per week in time, in words ("≈ 2.4 h a week"), where it can be told."""
    if v.cost_s is None or v.cost_s != v.cost_s or v.cost_s < 1:
        return None
    return per_week(v.cost_s)


def per_week(seconds: float) -> str:
    """Seconds a week in the unit a person says them in."""
    if seconds >= 3600:
        return f"≈ {seconds / 3600:,.1f} h a week"
    if seconds >= 60:
        return f"≈ {seconds / 60:,.0f} min a week"
    return f"≈ {seconds:,.0f} s a week"


def line(v: Verdict) -> str:
    """One line: status, where, what, change and the detector's summary."""
    return f"{STATUS_WORD.get(v.status, v.status)}: {title(v)} ({change(v)}) — {v.summary}"


def _short_where(text: str) -> str:
    return PurePath(text).name if "/" in text else text


def headline(model: str, hardware: str, verdicts: list[Verdict]) -> str:
    """What a person says of one model on one hardware in a weekly review, in one sentence: got
    worse (or better), the likely cause first (a new graph break at file:line, a function that
    started recompiling and on what guard), then the size of the biggest moves."""
    worse = [v for v in verdicts if v.status in (REGRESSION, SUSPICIOUS)]
    better = [v for v in verdicts if v.status == IMPROVEMENT]
    if not worse and not better:
        return f"{model} on {hardware}: nothing moved beyond the rules and the noise."
    causes = []
    order = {"new_graph_break": 0, "new_recompiling_function": 1, "new_cudagraph_skip": 2, "new_limit_hit": 3}
    for v in sorted(worse, key=lambda v: order.get(v.kind, 9)):
        ev = {e.kind: e for e in v.evidence}
        if v.kind == "new_graph_break" and "graph_break" in ev:
            causes.append(f"a new graph break ({ev['graph_break'].text})")
        elif v.kind == "new_recompiling_function" and "recompile" in ev:
            f = ev["recompile"].fields
            guard = f" on “{f['guard']}”" if f.get("guard") else ""
            causes.append(f"{f.get('function') or v.subject} started recompiling{guard}")
        elif v.kind == "new_cudagraph_skip" and "cudagraph_skip" in ev:
            causes.append(ev["cudagraph_skip"].text.replace("CUDA graphs skipped", "CUDA graphs are skipped", 1))
        elif v.kind == "new_limit_hit":
            causes.append(f"a recompile limit was hit ({ev['limit_hit'].text})" if "limit_hit" in ev else "a recompile limit was hit")
    # the biggest timing or memory move's own cause, where no new key already says why
    timed = [v for v in worse if not v.kind and cause(v) and metric_of(v.metric).kind != "count"]
    if timed and len(causes) < 2:
        top = max(timed, key=lambda v: (v.status == REGRESSION, v.cost_s or 0,
                                        abs(v.change) if v.change is not None and not math.isinf(v.change) else 0))
        causes.append(f"{what(top).split(' (')[0].lower()}{_subject(top)}: {cause(top)}")
    # timings and memory first, biggest move first; then the counts the causes above explain
    sizes = [v for v in worse if not v.kind]
    sizes.sort(key=lambda v: (metric_of(v.metric).kind == "count",
                              -(abs(v.change) if v.change is not None and not math.isinf(v.change) else 0)))
    size_text = ", ".join(f"{what(v).split(' (')[0].lower()}{_subject(v)} {change(v)}" for v in sizes[:3])
    if worse:
        tail = "; ".join(causes[:3] + ([size_text] if size_text else []))
        status = "got worse" if any(v.status == REGRESSION for v in worse) else "may have got worse"
        text = f"{model} on {hardware} {status}: {tail}"
        if better:
            text += f" (and {len(better)} thing{'s' if len(better) > 1 else ''} got better)"
        return text + "."
    return f"{model} on {hardware} got better: " + ", ".join(
        f"{what(v).split(' (')[0].lower()}{_subject(v)} {change(v)}" for v in better[:3]) + "."


def _subject(v: Verdict) -> str:
    return f" [{v.subject}]" if v.subject and not v.kind else ""
