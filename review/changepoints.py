"""When a metric changed, and what changed with it.

The search is ``ruptures`` (PELT, least-squares cost) on the series normalised by its noise: sigma
from the median absolute successive difference, which a level shift barely moves. Each split PELT
proposes is then kept only if a Welch t-test (scipy) between the runs before and after it gives
p <= ``changepoint_max_pvalue`` and the step passes the metric's ratio rule: a change point carries
its evidence (both sides' medians and spread, the p-value), as apache/otava's do.

Why ruptures and not apache-otava: otava's E-Divisive with its significance test is the stronger
method, but it installs about 45 packages (BigQuery, Slack and PostgreSQL clients among them) into
a dashboard that needs none of them; ruptures needs numpy and scipy, which the review already
uses, and the significance test on top is one scipy call.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

from compilewatch.review.metrics import fmt
from compilewatch.review.metrics import metric as metric_of
from compilewatch.review.regressions import RunValue, Side, _pct, _ratio_out
from compilewatch.review.rules import Rules

ATTRIBUTES = (("torch_version", "torch"), ("git_commit", "commit"), ("label", "label"))


@dataclass(frozen=True)
class ChangePoint:
    model: str
    hardware: str
    metric: str
    subject: str
    unit: str
    run: RunValue                  # the first run after the change
    before: Side
    after: Side
    change: float                  # after median / before median - 1
    p_value: float
    worse: bool
    changed: tuple[tuple[str, str, str], ...]   # (what, before, after) that differs at the split
    cache: str | None              # for compile time: whether the compile caches hit on each side
    summary: str

    def to_json(self) -> dict:
        return {"model": self.model, "hardware": self.hardware, "metric": self.metric, "subject": self.subject,
                "at_run": self.run.run_id, "at": self.run.run_time.isoformat() if self.run.run_time else None,
                "before_median": self.before.median, "after_median": self.after.median,
                "change": self.change, "p_value": self.p_value, "worse": self.worse,
                "changed": [{"what": w, "before": b, "after": a} for w, b, a in self.changed],
                "cache": self.cache, "summary": self.summary}


def _noise(x: np.ndarray) -> float:
    d = np.diff(x)
    s = float(stats.median_abs_deviation(d, scale="normal")) / math.sqrt(2) if len(d) else 0.0
    if s == 0:
        s = float(np.std(d, ddof=1)) / math.sqrt(2) if len(d) > 1 else 0.0
    return s


def split_points(x: np.ndarray, rules: Rules) -> list[int]:
    """Indices i where the series moves between x[i-1] and x[i], as PELT proposes them."""
    n = len(x)
    if n < 2 * rules.changepoint_min_size:
        return []
    sigma = _noise(x)
    if sigma == 0:
        # an exact series (counts): any step is a candidate; scale so a unit step costs like 10 sigma
        sigma = max(float(np.max(np.abs(x))) * 1e-3, 1e-9) if np.ptp(x) == 0 else float(np.ptp(x)) / 10
    z = (x - np.median(x)) / sigma
    algo = ruptures.Pelt(model="l2", min_size=rules.changepoint_min_size, jump=1).fit(z.reshape(-1, 1))
    return [b for b in algo.predict(pen=rules.changepoint_penalty * math.log(n)) if b < n]


def _welch(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 0.0 if a[0] != b[0] else 1.0
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    return 1.0 if p != p else float(p)


def _changed(before: tuple[RunValue, ...], after: tuple[RunValue, ...]) -> tuple[tuple[str, str, str], ...]:
    out = []
    last, first = before[-1], after[0]
    for attr, name in ATTRIBUTES:
        a, b = getattr(last, attr), getattr(first, attr)
        if (a or "") != (b or ""):
            out.append((name, str(a or "–"), str(b or "–")))
    return tuple(out)


def _cache_note(before: Side, after: Side, hit_rate: dict[str, float]) -> str | None:
    hb = [hit_rate[r.run_id] for r in before.runs if r.run_id in hit_rate]
    ha = [hit_rate[r.run_id] for r in after.runs if r.run_id in hit_rate]
    if not hb and not ha:
        return "no compile-cache events in the trace"
    def word(v):
        return "–" if not v else f"{100 * float(np.mean(v)):.0f}%"
    note = f"compile caches hit {word(hb)} before, {word(ha)} after"
    if hb and ha and float(np.mean(hb)) - float(np.mean(ha)) > 0.25:
        note += ": the caches went cold, not necessarily the code"
    elif hb and ha and float(np.mean(ha)) - float(np.mean(hb)) > 0.25:
        note += ": the caches warmed up, not necessarily a code improvement"
    return note


def change_points(model: str, hardware: str, metric: str, subject: str, runs: list[RunValue], rules: Rules,
                  unit: str | None = None, hit_rate: dict[str, float] | None = None) -> list[ChangePoint]:
    """Confirmed change points of one series (runs in time order), oldest first."""
    m = metric_of(metric)
    unit = m.unit if unit is None else unit
    runs = sorted(runs, key=lambda r: (r.run_time is None, r.run_time, r.run_id))
    x = np.array([r.value for r in runs], dtype=float)
    splits = split_points(x, rules)
    bounds = [0] + splits + [len(x)]
    out = []
    for i, s in enumerate(splits, start=1):
        before, after = tuple(runs[bounds[i - 1]:s]), tuple(runs[s:bounds[i + 1]])
        a, b = x[bounds[i - 1]:s], x[s:bounds[i + 1]]
        p = _welch(a, b)
        sb, sa = Side.of(before), Side.of(after)
        worse, better = _ratio_out(m, rules, sa.median, sb.median)
        if p > rules.changepoint_max_pvalue or not (worse or better):
            continue
        change = (sa.median / sb.median - 1) if sb.median else math.inf
        changed = _changed(before, after)
        cache = _cache_note(sb, sa, hit_rate or {}) if metric == "compile_time" else None
        what = ", ".join(f"{w} {x0} → {x1}" for w, x0, x1 in changed) or "no recorded change (same torch, commit, label)"
        when = runs[s].run_time.strftime("%Y-%m-%d %H:%M") if runs[s].run_time else runs[s].run_id
        summary = (f"{m.label}{f' [{subject}]' if subject else ''} moved {_pct(change)} at {when} "
                   f"({fmt(sb.median, unit)} → {fmt(sa.median, unit)}, p={p:.3g}); changed: {what}"
                   + (f"; {cache}" if cache else ""))
        out.append(ChangePoint(model, hardware, metric, subject, unit, runs[s], sb, sa, change, p, worse,
                               changed, cache, summary))
    return out
