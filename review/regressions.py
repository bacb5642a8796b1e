"""Noise-aware regression detection: series of per-run values in, verdicts out.

For one model x hardware x metric (x subject, e.g. one compiled callable), the baseline is the
median M of its runs. Each candidate run c is *flagged* when all three hold:

1. the ratio rule of PyTorch's HUD: c/M beyond the metric's threshold (``Rules``), direction-aware;
2. c lies outside the baseline runs' own range [min, max];
3. |c - M| > noise_sigmas * s, where s is the run-to-run standard deviation pooled over both sides
   (each side around its own median, so a real shift does not inflate it), and at least
   ``noise_sigmas`` standard errors of a run's median from its steps' own spread (IQR).

Two flagged runs in a row make a regression, one makes it suspicious. A lone candidate run (a CI
job) has no second run to confirm it, so it is judged against the baseline's spread more strictly:
it is a regression only when it also lies outside the baseline's prediction interval, |c - M| >
t * s_b * sqrt(1 + 1/n_b) with t the Student-t quantile (n_b - 1 degrees of freedom) of the coverage
``noise_sigmas`` has under normal noise (3: 99.73%); otherwise suspicious. Few baseline runs make
that interval wide, as they should: two runs 10% apart cannot say much about a third. Improvements
are the mirror image and are only reported when confirmed. Counts of compile events are exact, so
their s is usually 0 and any rise past the baseline's range counts. Keys (graph breaks, recompiling
functions, guard categories, limit hits) that no baseline run had are regressions in their own
right (``judge_new_keys``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime

import numpy as np
from scipy import stats

from compilewatch.review.metrics import Metric, fmt
from compilewatch.review.metrics import metric as metric_of
from compilewatch.review.rules import Rules

# verdict statuses, worst first
REGRESSION, SUSPICIOUS, IMPROVEMENT = "regression", "suspicious", "improvement"
INSUFFICIENT, DIFFERENT_HARDWARE, UNCHANGED = "insufficient_data", "different_hardware", "unchanged"
WORSE = (REGRESSION, SUSPICIOUS)


@dataclass(frozen=True)
class RunValue:
    """One run's value of one metric, with what identifies the run."""
    run_id: str
    run_time: datetime | None
    value: float
    spread: float | None = None      # within-run spread (IQR of the steps) when the metric has one
    n: int | None = None             # steps behind the value
    torch_version: str | None = None
    label: str | None = None
    git_commit: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class Side:
    """One side's runs and their summary: median, run-to-run sd, range."""
    runs: tuple[RunValue, ...]
    median: float | None
    sigma: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, runs) -> "Side":
        runs = tuple(sorted(runs, key=lambda r: (r.run_time or datetime.min, r.run_id)))
        values = np.array([r.value for r in runs], dtype=float)
        if not len(values):
            return cls(runs, None, None, None, None)
        return cls(runs, float(np.median(values)), _sd(values), float(values.min()), float(values.max()))

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.runs]

    def describe(self, unit: str) -> str:
        if self.median is None:
            return "no runs"
        spread = f", range {fmt(self.low, unit)}–{fmt(self.high, unit)}" if len(self.runs) > 1 else ""
        return f"median {fmt(self.median, unit)} over {len(self.runs)} run{'s' * (len(self.runs) != 1)}{spread}"


@dataclass(frozen=True)
class Evidence:
    """Why a verdict was reached, in one sentence plus the fields a report or a link needs."""
    kind: str        # graph_break | recompile | guard_category | limit_hit | runs | cache | hardware | command
    text: str
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CausePart:
    """One part of why a verdict moved, from what the store holds: the compile diff of the busiest
    changed frame, the frame and phase whose compile time grew, why the cache missed, the ranks
    that carry the change, a setting that differs, or the trade (what moved the other way)."""
    kind: str        # graphs | compile_phase | cache_miss | ranks | setting | trade
    text: str
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Cause:
    """Why, in one sentence (``text``) and in parts; ``frame`` names the changed frame whose diff
    the verdict's Compare link opens (co_name, co_file, co_firstlineno), where one is known."""
    text: str
    parts: tuple[CausePart, ...] = ()
    frame: dict | None = None

    def to_json(self) -> dict:
        return {"text": self.text, "parts": [asdict(p) for p in self.parts], "frame": self.frame}


@dataclass(frozen=True)
class Verdict:
    status: str
    model: str
    hardware: str
    metric: str                       # gate metric name (metrics.METRICS; a key verdict: KEY_RULES[kind].metric)
    subject: str = ""                 # the compiled callable, bench mode/task, break key, function...
    kind: str = ""                    # for key verdicts: new_graph_break, new_recompiling_function, ...
    unit: str = ""
    direction: str = "lower"
    baseline: Side | None = None
    candidate: Side | None = None
    change: float | None = None       # candidate median / baseline median - 1 (None for keys)
    flagged: tuple[str, ...] = ()     # candidate runs that crossed the rule
    summary: str = ""
    evidence: tuple[Evidence, ...] = ()
    cause: Cause | None = None        # why it moved (review/causes.py), for regressions and suspicious changes
    cost_s: float | None = None       # what it costs per week in seconds (review/cost.py), where it can be told

    @property
    def worse(self) -> bool:
        return self.status in WORSE

    def to_json(self) -> dict:
        """The gate's JSON item: model, hardware, metric, baseline, candidate, change, evidence, and more."""
        def side(s: Side | None):
            if s is None:
                return None
            return {"median": s.median, "sigma": s.sigma, "low": s.low, "high": s.high,
                    "runs": [{"run_id": r.run_id, "value": r.value, "spread": r.spread, "n": r.n,
                              "torch_version": r.torch_version, "label": r.label, "git_commit": r.git_commit,
                              "started_at": r.run_time.isoformat() if r.run_time else None} for r in s.runs]}
        return {"status": self.status, "model": self.model, "hardware": self.hardware, "metric": self.metric,
                "kind": self.kind or self.metric, "subject": self.subject, "unit": self.unit,
                "direction": self.direction, "baseline": side(self.baseline), "candidate": side(self.candidate),
                "change": self.change, "flagged_runs": list(self.flagged), "summary": self.summary,
                "evidence": [asdict(e) for e in self.evidence],
                "cause": self.cause.to_json() if self.cause else None, "cost_per_week_s": self.cost_s}


def _sd(values: np.ndarray) -> float:
    """Run-to-run standard deviation: sample sd for a few runs, the normal-scaled MAD from five on
    (one outlier run should not make every other change look like noise)."""
    if len(values) < 2:
        return 0.0
    if len(values) >= 5:
        # the normal-consistent MAD (scipy's median_abs_deviation(scale="normal")), without its overhead
        return float(1.482602218505602 * np.median(np.abs(values - np.median(values))))
    return float(np.std(values, ddof=1))


def noise(baseline: Side, candidate: Side) -> tuple[float, int, float]:
    """(pooled run-to-run sd, its degrees of freedom, a run median's standard error from its steps'
    IQR: IQR / 1.349 is the steps' sd, the median's error 1.253 sd / sqrt(n))."""
    nb, nc = len(baseline.runs), len(candidate.runs)
    sb, sc = baseline.sigma or 0.0, candidate.sigma or 0.0
    dof = max(nb - 1, 0) + max(nc - 1, 0)
    pooled = math.sqrt((max(nb - 1, 0) * sb ** 2 + max(nc - 1, 0) * sc ** 2) / dof) if dof > 0 else 0.0
    within = [1.253 * (r.spread / 1.349) / math.sqrt(r.n) for r in baseline.runs + candidate.runs
              if r.spread is not None and r.n and r.spread == r.spread and r.n > 0]
    return pooled, dof, float(np.median(within)) if within else 0.0


def noise_margin(baseline: Side, candidate: Side, rules: Rules) -> float:
    """How far from the baseline median a run must lie to be beyond noise (rule 3)."""
    pooled, _, within = noise(baseline, candidate)
    return rules.noise_sigmas * max(pooled, within)


def prediction_margin(baseline: Side, rules: Rules) -> float:
    """Half-width of the baseline's prediction interval for one more run (the lone-run rule)."""
    nb = len(baseline.runs)
    sb = baseline.sigma or 0.0
    _, _, within = noise(baseline, Side.of(()))
    if nb < 2 or sb == 0:
        return rules.noise_sigmas * within
    coverage = 2 * stats.norm.cdf(rules.noise_sigmas) - 1
    t = float(stats.t.ppf(1 - (1 - coverage) / 2, nb - 1))
    return max(t * sb * math.sqrt(1 + 1 / nb), rules.noise_sigmas * within)


def _ratio_out(m: Metric, rules: Rules, value: float, base: float) -> tuple[bool, bool]:
    """(worse, better) by the ratio rule alone."""
    if m.higher_is_better:
        lo = rules.min_ratio(m.name) or rules.speedup_min_ratio
        if base <= 0:
            return False, False
        return value < lo * base, value > base / lo
    hi = rules.max_ratio(m.name)
    hi = hi if hi is not None else 1.05
    if base == 0:
        return value > 0, False
    return value > hi * base, value < base / hi


def flag_runs(m: Metric, rules: Rules, baseline: Side, candidate: Side) -> tuple[list[bool], list[bool]]:
    """Per candidate run (in time order): flagged worse, flagged better."""
    margin = noise_margin(baseline, candidate, rules)
    worse, better = [], []
    for r in candidate.runs:
        w, b = _ratio_out(m, rules, r.value, baseline.median)
        outside = r.value > baseline.high or r.value < baseline.low
        beyond_noise = abs(r.value - baseline.median) > margin
        worse.append(w and outside and beyond_noise)
        better.append(b and outside and beyond_noise)
    return worse, better


def _group_shift(m: Metric, rules: Rules, baseline: Side, candidate: Side) -> tuple[bool, bool]:
    """(worse, better) by the group rule: at least `consecutive` candidate runs, all beyond every
    baseline run, the exact one-sided Mann-Whitney p <= group_max_pvalue, and the candidate median
    past the ratio rule. With 3 runs a side the most extreme ordering has p = 1/20 = 0.05: a shift
    that no single run shows beyond 3 sigma of a noisy machine, but all runs agree on."""
    if len(candidate.runs) < max(rules.consecutive, 2) or len(baseline.runs) < 2 or m.kind == "count":
        return False, False
    b = np.array([r.value for r in baseline.runs])
    c = np.array([r.value for r in candidate.runs])
    ratio_w, ratio_b = _ratio_out(m, rules, candidate.median, baseline.median)
    up = bool(c.min() > b.max())
    down = bool(c.max() < b.min())
    if not (up or down):
        return False, False
    p = float(stats.mannwhitneyu(c, b, alternative="greater" if up else "less", method="exact").pvalue)
    if p > rules.group_max_pvalue:
        return False, False
    return (ratio_w and (up != m.higher_is_better)), (ratio_b and (up == m.higher_is_better))


def _longest_run(flags: list[bool]) -> int:
    best = cur = 0
    for f in flags:
        cur = cur + 1 if f else 0
        best = max(best, cur)
    return best


def _status(flags: list[bool], rules: Rules, lone_strong: bool = False) -> tuple[bool, bool]:
    """(any flag, confirmed): enough flagged runs in a row, or a lone run beyond the prediction interval."""
    if not any(flags):
        return False, False
    if len(flags) == 1:
        return True, lone_strong
    return True, _longest_run(flags) >= rules.consecutive


def judge_values(model: str, hardware: str, metric: str, subject: str, baseline_runs, candidate_runs,
                 rules: Rules, unit: str | None = None, direction: str | None = None) -> Verdict:
    """The verdict on one series. Status: regression, suspicious, improvement, insufficient_data or
    unchanged. Evidence names the runs behind both medians and, for each flagged run, its value."""
    m = metric_of(metric)
    if direction and direction != m.direction:
        m = Metric(m.name, m.label, m.unit, direction, m.kind)
    unit = unit if unit is not None else m.unit
    base, cand = Side.of(baseline_runs), Side.of(candidate_runs)
    common = dict(model=model, hardware=hardware, metric=metric, subject=subject, unit=unit,
                  direction=m.direction, baseline=base, candidate=cand)
    need = 1 if m.kind == "count" else rules.min_baseline_runs
    if base.median is None or cand.median is None or len(base.runs) < need:
        return Verdict(INSUFFICIENT, **common, summary=(
            f"{m.label}: {len(base.runs)} baseline run(s), {len(cand.runs)} candidate run(s); "
            f"needs {need} baseline run(s) to judge"))
    change = (cand.median / base.median - 1) if base.median else (math.inf if cand.median > 0 else 0.0)
    worse, better = flag_runs(m, rules, base, cand)
    strong = len(cand.runs) == 1 and abs(cand.runs[0].value - base.median) > prediction_margin(base, rules)
    w_any, w_confirmed = _status(worse, rules, strong)
    b_any, b_confirmed = _status(better, rules, strong)
    # the group rule: every candidate run beyond every baseline run, significant as a whole
    w_group, b_group = _group_shift(m, rules, base, cand)
    if w_group:
        w_any = w_confirmed = True
        worse = [True] * len(cand.runs)
    elif b_group and not w_any:
        b_any = b_confirmed = True
        better = [True] * len(cand.runs)
    if w_any:
        status = REGRESSION if w_confirmed else SUSPICIOUS
        flags = worse
    elif b_confirmed:
        status, flags = IMPROVEMENT, better
    else:
        return Verdict(UNCHANGED, **common, change=change, summary=f"{m.label}: within the rules and the noise")
    flagged = tuple(r.run_id for r, f in zip(cand.runs, flags) if f)
    margin = noise_margin(base, cand, rules)
    what = {REGRESSION: "got worse", SUSPICIOUS: "suspicious", IMPROVEMENT: "got better"}[status]
    how_many = (f"{len(flagged)} of {len(cand.runs)} candidate runs flagged"
                + ((f" ({rules.consecutive} in a row needed)" if len(cand.runs) > 1 else
                    f" (a lone run must also leave the baseline's prediction interval, "
                    f"±{fmt(prediction_margin(base, rules), unit)})") if status == SUSPICIOUS else ""))
    summary = (f"{m.label}{f' [{subject}]' if subject else ''} {what}: {fmt(base.median, unit)} → "
               f"{fmt(cand.median, unit)} ({_pct(change)}); {how_many}; noise ±{fmt(margin, unit)}")
    evidence = [Evidence("runs", f"baseline {base.describe(unit)}; candidate {cand.describe(unit)}",
                         {"baseline_runs": base.run_ids, "candidate_runs": cand.run_ids,
                          "noise_margin": margin, "noise_sigmas": rules.noise_sigmas})]
    for r in cand.runs:
        if r.run_id in flagged:
            spread = f" (steps IQR {fmt(r.spread, unit)}, n={r.n})" if r.spread is not None and r.spread == r.spread else ""
            evidence.append(Evidence("run", f"run {r.run_id[:12]}: {fmt(r.value, unit)}{spread}",
                                     {"run_id": r.run_id, "value": r.value, "command": r.command}))
    return Verdict(status, **common, change=change, flagged=flagged, summary=summary, evidence=tuple(evidence))


def judge_paired_states(model: str, hardware: str, metric: str, subject: str,
                        states: dict[str, tuple[list[RunValue], list[RunValue]]], rules: Rules,
                        unit: str | None = None, direction: str | None = None) -> Verdict:
    """One verdict over several states of one series (compile-cache states: a version's cold first
    run and its warm second) when each state leaves too few baseline runs to judge it alone. Each
    state's candidate median is judged against the baseline median of the same state by the ratio
    rule; a move that every state makes the same way is flagged, and with no run-to-run spread to
    measure the noise it is a regression (an improvement) only when every state also moved at least
    ``paired_min_ratio``, else suspicious. States that disagree, or a move in one state alone, say
    nothing: one run per side cannot tell it from noise."""
    m = metric_of(metric)
    if direction and direction != m.direction:
        m = Metric(m.name, m.label, m.unit, direction, m.kind)
    unit = unit if unit is not None else m.unit
    sides = {st: (Side.of(b), Side.of(c)) for st, (b, c) in states.items()}
    base = Side.of([r for b, _ in states.values() for r in b])
    cand = Side.of([r for _, c in states.values() for r in c])
    common = dict(model=model, hardware=hardware, metric=metric, subject=subject, unit=unit,
                  direction=m.direction, baseline=base, candidate=cand)
    ratios = {st: (c.median / b.median if b.median else math.inf) for st, (b, c) in sides.items()}
    out = {st: _ratio_out(m, rules, c.median, b.median) for st, (b, c) in sides.items()}
    finite = [r for r in ratios.values() if 0 < r < math.inf]
    change = (math.exp(sum(math.log(r) for r in finite) / len(finite)) - 1) if len(finite) == len(ratios) else None
    per_state = "; ".join(f"{st} {fmt(b.median, unit)} → {fmt(c.median, unit)} ({_pct(ratios[st] - 1)})"
                          for st, (b, c) in sides.items())
    evidence = [Evidence("paired_states", f"one run a side in each cache state, each judged against the other "
                                          f"side's run in the same state: {per_state}",
                         {"states": {st: {"baseline": b.run_ids, "candidate": c.run_ids, "ratio": ratios[st]}
                                     for st, (b, c) in sides.items()}})]
    worse = all(w for w, _ in out.values())
    better = all(b for _, b in out.values())
    if not (worse or better):
        return Verdict(UNCHANGED, **common, change=change,
                       summary=f"{m.label}: the cache states did not all move past the rules ({per_state})",
                       evidence=tuple(evidence))
    # how far every state moved (all moved the same way past the rule), as a ratio above 1
    far = min(max(r, 1 / r) if r > 0 else math.inf for r in ratios.values())
    strong = far >= rules.paired_min_ratio
    if worse:
        status = REGRESSION if strong else SUSPICIOUS
    else:
        if not strong:
            return Verdict(UNCHANGED, **common, change=change, summary=f"{m.label}: within the rules ({per_state})",
                           evidence=tuple(evidence))
        status = IMPROVEMENT
    flagged = tuple(cand.run_ids)
    what = {REGRESSION: "got worse", SUSPICIOUS: "suspicious", IMPROVEMENT: "got better"}[status]
    need = ("" if strong else
            f"; every state must move {rules.paired_min_ratio:g}x to confirm it with one run a side")
    summary = (f"{m.label}{f' [{subject}]' if subject else ''} {what} in every cache state: {per_state}"
               f"{need}")
    return Verdict(status, **common, change=change, flagged=flagged, summary=summary, evidence=tuple(evidence))


def _pct(change: float | None) -> str:
    if change is None:
        return "–"
    if math.isinf(change):
        return "new"
    return f"{100 * change:+.1f}%"


@dataclass(frozen=True)
class KeyRule:
    kind: str          # new_graph_break | new_recompiling_function | new_guard_category | new_limit_hit
    metric: str        # the gate metric it counts under
    noun: str


KEY_RULES = {
    "new_graph_break": KeyRule("new_graph_break", "new_graph_break", "graph break"),
    "new_recompiling_function": KeyRule("new_recompiling_function", "recompiles", "recompiling function"),
    "new_guard_category": KeyRule("new_guard_category", "recompiles", "guard-failure category"),
    "new_limit_hit": KeyRule("new_limit_hit", "limit_hits", "recompile-limit hit"),
    "new_cudagraph_skip": KeyRule("new_cudagraph_skip", "cudagraph_skips", "CUDA-graph skip"),
}


def judge_new_keys(kind: str, model: str, hardware: str, baseline_ids: list[str], candidate_ids: list[str],
                   keys: list[dict], rules: Rules, describe) -> list[Verdict]:
    """Keys the candidate runs had and no baseline run had (regressions; suspicious when fewer than
    `consecutive` candidate runs in a row had it, unless there is one candidate run), and keys every
    baseline run had and no candidate run has (improvements). ``keys`` are records with run_id, key,
    count and the evidence fields, for these runs; ``describe(record) -> Evidence`` words one key."""
    rule = KEY_RULES[kind]
    if not baseline_ids or not candidate_ids:
        return []
    base_set, cand_set = set(baseline_ids), set(candidate_ids)
    by_key: dict[str, list[dict]] = {}
    for rec in keys:
        by_key.setdefault(rec["key"], []).append(rec)
    out = []
    for key in sorted(by_key, key=str):
        recs = by_key[key]
        runs = {r["run_id"] for r in recs}
        in_base, in_cand = runs & base_set, runs & cand_set
        if in_cand and not in_base:
            present = [rid in in_cand for rid in candidate_ids]
            confirmed = len(candidate_ids) == 1 or _longest_run(present) >= rules.consecutive
            per_run = sum(r["count"] for r in recs if r["run_id"] in cand_set) / len(candidate_ids)
            ev = describe(next(r for r in recs if r["run_id"] in cand_set))
            out.append(Verdict(REGRESSION if confirmed else SUSPICIOUS, model, hardware, rule.metric,
                               subject=str(key), kind=kind, unit="", direction="lower", change=None,
                               flagged=tuple(r for r, p in zip(candidate_ids, present) if p),
                               summary=f"new {rule.noun}: {ev.text} — in {sum(present)} of {len(candidate_ids)} "
                                       f"candidate runs ({per_run:.1f} per run), in none of {len(baseline_ids)} "
                                       f"baseline runs", evidence=(ev,)))
        elif in_base == base_set and not in_cand:
            ev = describe(recs[0])
            out.append(Verdict(IMPROVEMENT, model, hardware, rule.metric, subject=str(key),
                               kind=kind.replace("new_", "fixed_"),
                               summary=f"{rule.noun} gone: {ev.text} — in all {len(baseline_ids)} baseline runs, "
                                       f"none of {len(candidate_ids)} candidate runs", evidence=(ev,)))
    return out
