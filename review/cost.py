"""What a regression costs a team per week, in time: the figure that says which fix pays most.

- compile time (and time to the first step): the extra seconds per run times the runs a week;
- step and iteration time: the extra milliseconds per step times the steps a run takes, times the
  runs a week.

"A week" is the candidate's runs spread over their own span, at least one week: ten runs in three
days are ten a week, not twenty-three. Counts and keys (a new graph break, more recompiles) cost
what they do to these timings, which their own verdicts carry; memory costs no time, so they have
none. Pure: verdicts in, verdicts out.
"""
from __future__ import annotations

import dataclasses
import statistics
from datetime import datetime

from compilewatch.review.metrics import COMPILE_METRICS
from compilewatch.review.regressions import REGRESSION, SUSPICIOUS, Verdict

PER_RUN_S = {m: 1.0 for m in COMPILE_METRICS}                      # value unit s, once per run
PER_STEP_S = {"step_time": 1e-3, "iteration_time": 1e-3}            # value unit ms, once per step
WEEK_S = 7 * 86400


def runs_per_week(v: Verdict) -> float:
    runs = v.candidate.runs if v.candidate else ()
    times = [r.run_time for r in runs if isinstance(r.run_time, datetime)]
    if not runs:
        return 0.0
    span = (max(times) - min(times)).total_seconds() if len(times) > 1 else 0.0
    return len(runs) / max(1.0, span / WEEK_S)


def weekly_cost_s(v: Verdict) -> float | None:
    """Seconds a week the change costs (only for what got worse, and only where it is time)."""
    if v.status not in (REGRESSION, SUSPICIOUS) or v.kind or v.baseline is None or v.candidate is None:
        return None
    if v.baseline.median is None or v.candidate.median is None:
        return None
    extra = v.candidate.median - v.baseline.median
    if extra <= 0:
        return None
    if v.metric in PER_RUN_S:
        return extra * PER_RUN_S[v.metric] * runs_per_week(v)
    if v.metric in PER_STEP_S:
        steps = [r.n for r in v.candidate.runs if r.n]
        if not steps:
            return None
        return extra * PER_STEP_S[v.metric] * statistics.median(steps) * runs_per_week(v)
    return None


def attach(verdicts: list[Verdict]) -> list[Verdict]:
    return [dataclasses.replace(v, cost_s=c) if (c := weekly_cost_s(v)) is not None else v for v in verdicts]


def group_costs(verdicts: list[Verdict]) -> dict[tuple[str, str], float]:
    """Per model x hardware: the week's cost of its regressions and suspicious changes. The time to
    the first step holds the compile time, and the iteration holds the compiled step: of each such
    family the largest cost counts, so one slowdown is not counted twice."""
    fam: dict[tuple[str, str, str], float] = {}
    for v in verdicts:
        if v.cost_s:
            k = (v.model, v.hardware, "run" if v.metric in PER_RUN_S else "step")
            fam[k] = max(fam.get(k, 0.0), v.cost_s)
    out: dict[tuple[str, str], float] = {}
    for (model, hw, _), c in fam.items():
        out[(model, hw)] = out.get((model, hw), 0.0) + c
    return out
