"""What the review reads before it puts a slower run down to the machine rather than the code: the
settings each run ran under (``run_settings``: torch's switches, the compiler's config entries off
their defaults, speed-related environment variables; ingest/bundle.py TIMINGS_DOC) and the host
probe timed before and after it (``host_probes``: a fixed workload the job cannot change;
collectors/host_probe.py). Plain functions over the store that gather the evidence and say how
strong it is; which verdict follows is review/weekly.py's to decide.

A settings change slows every step while every graph stays the same, and so does a slower or busier
machine: only the probe tells the two apart. A probe that ran at the same speed on both sides says
the machine did not change; one beyond its own noise says it did.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from compilewatch.ingest.bundle import SETTING_SOURCES
from compilewatch.review.series import df

SETTINGS_COLUMNS = ["run_id", "rank", "name", "value", "source"]
PROBE_COLUMNS = ["run_id", "phase", "device", "median_ms", "iqr_ms", "samples", "load_avg"]

# What a name missing from a run that recorded its settings means, by source: config entries and
# environment variables are listed only when off their default or set; torch's switches are always
# listed, so a missing one is one that run's torch could not report, which says nothing.
DEFAULT = "(default)"
UNSET = "(unset)"
MISSING_MEANS = {"dynamo_config": DEFAULT, "inductor_config": DEFAULT, "functorch_config": DEFAULT,
                 "env": UNSET, "torch": None}

# The probe's noise is at least this (relative): its rounds' medians move this much on an idle host.
PROBE_NOISE_FLOOR = 0.05
# Probe times a side needs (each run gives two: before and after) before it may say anything.
MIN_PROBES = 2


def _ids(run_ids) -> list[str]:
    return [str(r) for r in run_ids]


def run_settings(con, run_ids: Iterable[str]) -> pd.DataFrame:
    """The settings rows of `run_ids`: run_id, rank, name, value, source, one per rank and name. A
    run collected before settings were recorded has no rows."""
    ids = _ids(run_ids)
    if not ids:
        return pd.DataFrame(columns=SETTINGS_COLUMNS)
    return df(con, "SELECT run_id, rank, name, value, source FROM run_settings "
                   "WHERE list_contains(?::VARCHAR[], run_id) ORDER BY run_id, rank, source, name", [ids])


def host_probes(con, run_ids: Iterable[str]) -> pd.DataFrame:
    """The host probes of `run_ids` that gave a time: run_id, phase (before | after), device,
    median_ms, iqr_ms, samples, load_avg."""
    ids = _ids(run_ids)
    if not ids:
        return pd.DataFrame(columns=PROBE_COLUMNS)
    return df(con, f"SELECT {', '.join(PROBE_COLUMNS)} FROM host_probes "
                   "WHERE list_contains(?::VARCHAR[], run_id) AND median_ms IS NOT NULL ORDER BY run_id, phase", [ids])


@dataclass(frozen=True)
class SettingChange:
    """One setting whose values on the two sides have none in common. `baseline` and `candidate`
    are the distinct values each side's runs (all their ranks) had, sorted; DEFAULT or UNSET stand
    for a config entry at its default or an environment variable not set."""
    name: str
    source: str
    baseline: tuple[str, ...]
    candidate: tuple[str, ...]

    def sentence(self) -> str:
        return f"{self.name} ({self.source}): {' / '.join(self.baseline)} → {' / '.join(self.candidate)}"


def _side_processes(frame: pd.DataFrame, run_ids: set[str]) -> dict[tuple, dict[str, str]] | None:
    """(run, rank) -> {name: value} for each process of the side that recorded its settings; None
    when none did."""
    rows = frame[frame["run_id"].astype(str).isin(run_ids)]
    if rows.empty:
        return None
    processes: dict[tuple, dict[str, str]] = defaultdict(dict)
    for run_id, rank, name, value in zip(rows["run_id"], rows["rank"], rows["name"], rows["value"]):
        rank = None if pd.isna(rank) else int(rank)
        processes[(str(run_id), rank)][name] = value
    return processes


def settings_differ(base_run_ids: Iterable[str], cand_run_ids: Iterable[str],
                    frame: pd.DataFrame) -> list[SettingChange]:
    """The settings whose values differ between the baseline's and the candidate's runs, from
    `frame` (run_settings' shape). A setting differs when both sides have a value for it and their
    sets of values do not overlap: a side that ran under both the old and the new value explains
    nothing. Runs without settings rows (older bundles) are left out of their side; when a side has
    none, nothing is said (an empty list). Ordered by source (torch, then the configs, then the
    environment) and name."""
    base = _side_processes(frame, set(_ids(base_run_ids)))
    cand = _side_processes(frame, set(_ids(cand_run_ids)))
    if not base or not cand:
        return []
    sources = dict(zip(frame["name"], frame["source"]))
    changes = []
    for name in sorted(sources, key=lambda n: (_source_order(sources[n]), n)):
        missing = MISSING_MEANS.get(sources[name])
        sides = []
        for processes in (base, cand):
            values = {p[name] if name in p else missing for p in processes.values()}
            values.discard(None)
            sides.append(values)
        if sides[0] and sides[1] and not sides[0] & sides[1]:
            changes.append(SettingChange(name, sources[name], tuple(sorted(sides[0])), tuple(sorted(sides[1]))))
    return changes


def _source_order(source: str) -> int:
    return SETTING_SOURCES.index(source) if source in SETTING_SOURCES else len(SETTING_SOURCES)


@dataclass(frozen=True)
class ProbeEvidence:
    """The host probe on both sides. `baseline_ms` / `candidate_ms`: every probe time of the side
    (two per run: before and after its job); `ratio`: the candidate's median over the baseline's
    (above 1: the host ran the same workload slower); `noise`: the probe's own relative
    run-to-run spread, the larger of the two sides' (max - min) / median, at least
    PROBE_NOISE_FLOOR. `conclusive`: both sides have MIN_PROBES times and the ratio moved beyond
    the noise (the host's speed changed); `steady`: both sides have them and it did not (the host
    ran at the same speed, as far as the probe can tell). `why` says which, in a sentence."""
    device: str | None
    baseline_ms: tuple[float, ...]
    candidate_ms: tuple[float, ...]
    baseline_median_ms: float | None
    candidate_median_ms: float | None
    ratio: float | None
    noise: float
    conclusive: bool
    steady: bool
    why: str
    baseline_load: float | None = None    # median 1-minute load average as the side's probes started
    candidate_load: float | None = None

    @property
    def host_slower(self) -> bool:
        return self.conclusive and self.ratio is not None and self.ratio > 1


def _probe_frame(source, run_ids: set[str]) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        frame = source
    elif isinstance(source, Mapping):
        frame = pd.DataFrame([{"run_id": str(r), "median_ms": float(v)} for r, vs in source.items()
                              for v in ([vs] if isinstance(vs, (int, float)) else vs)],
                             columns=["run_id", "median_ms"])
    else:
        frame = host_probes(source, run_ids)
    frame = frame[frame["run_id"].astype(str).isin(run_ids)]
    return frame[frame["median_ms"].notna()]


def _rel_spread(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else 0.0


def _median_or_none(values) -> float | None:
    values = [float(v) for v in values if not pd.isna(v)]
    return statistics.median(values) if values else None


def probe_speed(source, base_run_ids: Iterable[str], cand_run_ids: Iterable[str]) -> ProbeEvidence | None:
    """The host probe's verdict on the machine between the baseline's and the candidate's runs.
    `source`: a store connection, a frame shaped like host_probes(), or {run_id: probe ms or a list
    of them}. None when neither side has a probe time (nothing is known of the host)."""
    base_ids, cand_ids = set(_ids(base_run_ids)), set(_ids(cand_run_ids))
    probes = _probe_frame(source, base_ids | cand_ids)
    if probes.empty:
        return None
    base = probes[probes["run_id"].astype(str).isin(base_ids)]
    cand = probes[probes["run_id"].astype(str).isin(cand_ids)]
    devices = set(probes["device"].dropna()) if "device" in probes else set()
    b, c = [float(v) for v in base["median_ms"]], [float(v) for v in cand["median_ms"]]
    bm, cm = _median_or_none(b), _median_or_none(c)
    ratio = cm / bm if bm and cm is not None else None
    noise = max(_rel_spread(b), _rel_spread(c), PROBE_NOISE_FLOOR)
    loads = [_median_or_none(side["load_avg"]) if "load_avg" in side else None for side in (base, cand)]
    enough = len(b) >= MIN_PROBES and len(c) >= MIN_PROBES and len(devices) <= 1
    moved = ratio is not None and abs(ratio - 1) > noise
    if len(devices) > 1:
        why = f"the probes ran on different devices ({', '.join(sorted(devices))}): their times do not compare"
    elif not enough:
        why = (f"too few probe times to judge the host (baseline {len(b)}, candidate {len(c)}; "
               f"{MIN_PROBES} a side needed)")
    elif moved:
        why = (f"the host ran the probe {'slower' if ratio > 1 else 'faster'}: {cm:.2f} ms against {bm:.2f} ms "
               f"({ratio:.2f}x), beyond the probe's own noise of ±{100 * noise:.0f}%")
    else:
        why = (f"the host ran the probe at the same speed: {cm:.2f} ms against {bm:.2f} ms ({ratio:.2f}x), "
               f"within the probe's own noise of ±{100 * noise:.0f}%")
    return ProbeEvidence(
        device=next(iter(devices)) if len(devices) == 1 else None,
        baseline_ms=tuple(b), candidate_ms=tuple(c), baseline_median_ms=bm, candidate_median_ms=cm,
        ratio=ratio, noise=noise, conclusive=enough and moved, steady=enough and not moved, why=why,
        baseline_load=loads[0], candidate_load=loads[1])
