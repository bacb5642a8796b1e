"""Which runs are the baseline and which the candidate.

A SPEC names runs by what a team knows them by: ``label=NAME``, ``torch=VERSION``, ``commit=SHA``,
``run=RUN_ID``, ``hardware=NAME``, ``model=NAME``. Terms are given repeatedly (``--baseline
label=v1 --baseline model=llama``) or comma-separated (``label=v1,model=llama``); different keys
must all hold, the same key repeated means any of its values. Without a SPEC a side is a time
window: the candidate the last ``since`` (7 days) up to the newest run in the store, the baseline
the same span before it. A team pins its baseline by setting ``review_baseline`` to a SPEC.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from compilewatch.core.errors import SpecError

KEYS = ("label", "torch", "commit", "run", "hardware", "model")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdw])\s*$", re.I)


@dataclass(frozen=True)
class Spec:
    """A conjunction of key -> allowed values; empty means "every run" (a window then narrows it)."""
    terms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    text: str = ""

    def __bool__(self) -> bool:
        return bool(self.terms)

    def values(self, key: str) -> tuple[str, ...]:
        return dict(self.terms).get(key, ())

    def __str__(self) -> str:
        return self.text or "all runs"


def parse_spec(items: str | list[str] | tuple[str, ...] | None) -> Spec:
    """A Spec from SPEC strings; raises SpecError on an unknown key or a term without '='."""
    if not items:
        return Spec()
    if isinstance(items, str):
        items = [items]
    found: dict[str, list[str]] = {}
    texts = []
    for item in items:
        for term in (t.strip() for t in str(item).split(",")):
            if not term:
                continue
            key, eq, value = term.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not eq or not value:
                raise SpecError(f"'{term}' is not KEY=VALUE")
            if key not in KEYS:
                raise SpecError(f"unknown SPEC key '{key}' in '{term}'")
            found.setdefault(key, []).append(value)
            texts.append(f"{key}={value}")
    return Spec(tuple((k, tuple(v)) for k, v in found.items()), ", ".join(texts))


def parse_since(text: str | None, default: str = "7d") -> timedelta:
    """'7d', '36h', '2w' -> timedelta; SpecError otherwise."""
    m = _DURATION.match(text or default)
    if not m:
        raise SpecError(f"--since '{text}' is not a duration", "write it as 7d, 36h or 2w")
    n, unit = float(m.group(1)), m.group(2).lower()
    if n <= 0:
        raise SpecError(f"--since '{text}' is not a positive duration", "write it as 7d, 36h or 2w")
    return timedelta(hours=n) if unit == "h" else timedelta(days=n * (7 if unit == "w" else 1))


@dataclass(frozen=True)
class Window:
    start: datetime | None = None    # inclusive
    end: datetime | None = None      # exclusive

    def __str__(self) -> str:
        fmt = "%Y-%m-%d %H:%M"
        if not self.start and not self.end:
            return "any time"
        return f"{self.start.strftime(fmt) if self.start else '…'} – {self.end.strftime(fmt) if self.end else '…'} UTC"


def spec_where(spec: Spec, runs: str = "rv") -> tuple[str, list]:
    """A WHERE clause over the review's runs relation (columns as in series.RUNS) and its parameters.
    torch matches a version or its prefix (torch=2.13 takes 2.13.0+cpu), commit and run a prefix,
    hardware any part of the hardware name, case-insensitive; label and model match exactly."""
    clauses, params = [], []
    for key, values in spec.terms:
        ors = []
        for v in values:
            if key == "label":
                ors.append(f"{runs}.label = ?"); params.append(v)
            elif key == "model":
                ors.append(f"{runs}.model = ?"); params.append(v)
            elif key == "torch":
                ors.append(f"({runs}.torch_version = ? OR {runs}.torch_version LIKE ? OR {runs}.torch_version LIKE ?)")
                params += [v, v + ".%", v + "+%"]
            elif key == "commit":
                ors.append(f"starts_with(lower({runs}.git_commit), lower(?))"); params.append(v)
            elif key == "run":
                ors.append(f"starts_with({runs}.run_id, ?)"); params.append(v)
            elif key == "hardware":
                ors.append(f"contains(lower({runs}.hardware), lower(?))"); params.append(v)
        clauses.append("(" + " OR ".join(ors) + ")")
    return (" AND ".join(clauses) or "TRUE"), params


def window_where(window: Window, runs: str = "rv") -> tuple[str, list]:
    clauses, params = [], []
    if window.start:
        clauses.append(f"{runs}.run_time >= ?"); params.append(window.start)
    if window.end:
        clauses.append(f"{runs}.run_time < ?"); params.append(window.end)
    return (" AND ".join(clauses) or "TRUE"), params


@dataclass(frozen=True)
class Sides:
    """The two sides of one review, as asked for: SPECs, windows, and how each was described."""
    baseline: Spec = field(default_factory=Spec)
    candidate: Spec = field(default_factory=Spec)
    baseline_window: Window = field(default_factory=Window)
    candidate_window: Window = field(default_factory=Window)

    def describe(self) -> tuple[str, str]:
        def one(spec: Spec, window: Window) -> str:
            if spec and (window.start or window.end):
                return f"{spec} ({window})"
            return str(spec) if spec else str(window)
        return one(self.baseline, self.baseline_window), one(self.candidate, self.candidate_window)


def resolve_sides(baseline: Spec, candidate: Spec, since: timedelta, newest: datetime | None,
                  pinned: Spec | None = None) -> Sides:
    """The windows that go with the SPECs given. A side without a SPEC is a window: the candidate
    the last `since` up to the newest run (inclusive), the baseline the same span before it. A SPEC
    side has no window: `label=v1` means every run of v1. A pinned SPEC stands in for a missing baseline."""
    if not baseline and pinned:
        baseline = pinned
    end = (newest + timedelta(microseconds=1)) if newest else None
    cand_window = Window() if candidate else Window(end - since if end else None, end)
    if baseline:
        base_window = Window()
    elif candidate:
        # a candidate named by SPEC against "what came before it": no window; detect excludes
        # candidate runs from the baseline and the runs after the candidate's first run
        base_window = Window()
    else:
        base_window = Window(end - 2 * since if end else None, end - since if end else None)
    return Sides(baseline, candidate, base_window, cand_window)
