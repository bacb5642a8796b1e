"""Whether a timing change is the machine's, and only with evidence from outside the job.

A job's own compiled step cannot tell a slower machine from slower code: a settings change (one
thread instead of all cores, deterministic kernels, no TF32) leaves every graph identical and makes
every step slower, exactly as a busier machine would. So the review puts a timing change down to
the host only when something outside the job's own step says the machine changed:

- **the probe**: `compilewatch collect` times a fixed eager workload on the job's device before and
  after the job (``host_probe``, one value per run); when the probe itself moved between the sides,
  past its own noise and the ratio rule, the machine ran at another speed; or
- **the peers**: other jobs of the same hardware kind, run on the same days as this job's runs on
  each side, whose busiest timing moved the same way (more than half of them).

And never where the code may be the cause: the compiled graphs differ (their fingerprints, else a
new or gone key or a changed count), the torch version differs, or a setting that changes speed
differs (the setting is then named as the cause). Without evidence, a large change with tight noise
stays what the rules made it: a regression.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date

from compilewatch.review.metrics import fmt
from compilewatch.review.regressions import IMPROVEMENT, REGRESSION, SUSPICIOUS, UNCHANGED, Evidence, Verdict

TIMINGS = ("step_time", "iteration_time", "compile_time", "time_to_first_step")
COUNTS = ("graph_breaks", "recompiles", "limit_hits", "failures")
PROBE = "host_probe"
MOVED = (REGRESSION, SUSPICIOUS, IMPROVEMENT)
# how much further than the machine's own change a timing may have moved and still be put down to it
HOST_SHARE = 1.5


@dataclass(frozen=True)
class HostSpeed:
    """The machine ran at another speed: by ``factor`` (candidate / baseline - 1), said by ``source``."""
    factor: float
    source: str            # probe | peers
    text: str
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """What the host rule reads of one model x hardware: its verdicts, its runs' days per side, and
    what else could explain a timing change."""
    model: str
    hardware: str
    verdicts: list[Verdict]
    baseline_days: frozenset[date]
    candidate_days: frozenset[date]
    same_torch: bool
    graphs_changed: bool | None = None     # from the frames' fingerprints; None: not known
    graph_text: str = ""
    settings: tuple = ()                   # settings that differ (review.evidence.SettingChange)
    probe: Verdict | None = None           # the host probe's own verdict (never reported)


def _moved(v: Verdict) -> bool:
    return v.status in MOVED and v.change is not None and v.change == v.change and abs(v.change) != float("inf")


def busiest_timing(verdicts: list[Verdict]) -> Verdict | None:
    """The figure a job's speed is read from: its busiest compiled callable's step (the largest
    baseline median), else its iteration period."""
    steps = [v for v in verdicts if v.metric == "step_time" and v.baseline is not None and v.baseline.median]
    if steps:
        return max(steps, key=lambda v: v.baseline.median)
    return next((v for v in verdicts if v.metric == "iteration_time" and v.baseline is not None), None)


def code_may_differ(g: Group) -> str | None:
    """Why the code (not the machine) may be the cause, in words; None when nothing says so."""
    if not g.same_torch:
        return "the torch version differs between the sides"
    if g.settings:
        return "a setting differs between the sides: " + "; ".join(c.sentence() for c in g.settings[:3])
    if g.graphs_changed:
        return g.graph_text or "the compiled graphs differ between the sides"
    if g.graphs_changed is None and any(
            (v.kind and v.status != UNCHANGED) or (v.metric in COUNTS and v.status in MOVED) for v in g.verdicts):
        return "the graph breaks or recompiles changed"
    return None


def probe_speed(g: Group) -> HostSpeed | None:
    """The probe's own verdict: the machine is slower (faster) when the probe moved past its noise."""
    probe = g.probe
    if probe is None or probe.status not in (REGRESSION, IMPROVEMENT) or not _moved(probe):
        return None
    text = (f"the host probe (a fixed eager workload the collector times on the device before and after "
            f"each job) ran {100 * probe.change:+.0f}%: {fmt(probe.baseline.median, probe.unit)} → "
            f"{fmt(probe.candidate.median, probe.unit)}, beyond its own noise")
    return HostSpeed(probe.change, "probe", text, {"probe_change": probe.change,
                                                   "baseline_runs": probe.baseline.run_ids,
                                                   "candidate_runs": probe.candidate.run_ids})


def peer_speed(g: Group, groups: list[Group], factor: float) -> HostSpeed | None:
    """Other jobs of the same hardware, run on the same days on each side: more than half of them
    moved the same way as this job (their busiest timing, confirmed), so the machine did."""
    # a peer whose own code may have changed says nothing about the machine
    peers = [p for p in groups if p.hardware == g.hardware and p.model != g.model
             and p.baseline_days & g.baseline_days and p.candidate_days & g.candidate_days
             and code_may_differ(p) is None]
    figures = [(p, busiest_timing(p.verdicts)) for p in peers]
    figures = [(p, v) for p, v in figures if v is not None]
    if not figures:
        return None
    along = [(p, v) for p, v in figures if _moved(v) and v.status != SUSPICIOUS and (v.change > 0) == (factor > 0)]
    if 2 * len(along) <= len(figures):
        return None
    changes = sorted(v.change for _, v in along)
    median = changes[len(changes) // 2]
    names = ", ".join(f"{p.model} {100 * v.change:+.0f}%" for p, v in along[:4])
    text = (f"{len(along)} of {len(figures)} other job(s) on {g.hardware} run on the same days moved the "
            f"same way ({names}): the machine ran at another speed")
    return HostSpeed(median, "peers", text, {"peers": [p.model for p, _ in along],
                                             "peer_changes": [v.change for _, v in along]})


def judge_host(verdicts: list[Verdict], g: Group, groups: list[Group]) -> None:
    """Put the group's timing changes down to the machine where the evidence says so (worse:
    suspicious, better: unchanged), in place; otherwise say in each moved timing's evidence why
    it was not (what may differ, or that nothing outside the job says the machine changed)."""
    busiest = busiest_timing(g.verdicts)
    timed = [i for i, v in enumerate(verdicts) if v.model == g.model and v.hardware == g.hardware
             and v.metric in TIMINGS and _moved(v)]
    if not timed:
        return
    why_code = code_may_differ(g)
    host = None
    if why_code is None and busiest is not None and _moved(busiest):
        host = probe_speed(g) or peer_speed(g, groups, busiest.change)
    if host is None:
        text = (f"not put down to the machine: {why_code}" if why_code else
                "not put down to the machine: nothing outside the job says it changed "
                "(no host probe moved, no other job on this hardware the same days moved the same way)")
        for i in timed:
            v = verdicts[i]
            if v.status != IMPROVEMENT:
                verdicts[i] = dataclasses.replace(v, evidence=v.evidence + (Evidence("host_check", text, {}),))
        return
    for i in timed:
        v = verdicts[i]
        if (v.change > 0) != (host.factor > 0) or abs(v.change) > HOST_SHARE * abs(host.factor):
            continue
        ev = Evidence("host", host.text, {"factor": host.factor, "source": host.source, **host.fields})
        if v.worse:
            verdicts[i] = dataclasses.replace(v, status=SUSPICIOUS, summary=v.summary + " (host speed)",
                                              evidence=v.evidence + (ev,))
        elif v.status == IMPROVEMENT:
            verdicts[i] = dataclasses.replace(v, status=UNCHANGED, summary=v.summary + " (host speed)",
                                              evidence=v.evidence + (ev,))
