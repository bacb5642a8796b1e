"""The review as the CLI runs it: SPEC strings and paths in, a Review out (``report`` and ``check``)."""
from __future__ import annotations

from pathlib import Path

from compilewatch.core.errors import InputError, SpecError
from compilewatch.review.baseline import parse_since, parse_spec
from compilewatch.review.rules import Rules, pinned_baseline
from compilewatch.review.weekly import Review, review


def ingest_candidate(store, paths: list[str]) -> list[str]:
    """Ingest bundle/log paths into the store first; their run ids (stored now or before) are the candidate."""
    from compilewatch.ingest.loader import ingest_paths

    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise InputError(f"no such file or folder: {', '.join(missing)}", "give the candidate's bundles or logs")
    report = ingest_paths(store, paths, source="cli")
    failed = [f for f in report.files if f.status == "failed"]
    if failed:
        raise InputError(f"{failed[0].name}: {failed[0].message}", "the candidate's logs must ingest cleanly")
    ids = sorted({f.run_id for f in report.files if f.run_id})
    if not ids:
        raise InputError("the candidate paths hold no run", "give compilewatch bundles or torch.compile logs")
    return ids


def run_review(store, baseline: list[str] | None, candidate: list[str] | None, since: str | None = None,
               candidate_paths: list[str] | None = None, rules: Rules | None = None,
               require_sides: bool = False) -> Review:
    """Parse the SPECs (SpecError on a bad one), ingest candidate paths, and review. With
    ``require_sides`` (the gate) a side that selects no runs is an error, not a silent pass."""
    base, cand = parse_spec(baseline), parse_spec(candidate)
    window = parse_since(since)
    pinned = parse_spec(pinned_baseline()) if pinned_baseline() else None
    rules = rules or Rules.from_settings()
    if candidate_paths:
        ids = ingest_candidate(store, candidate_paths)
        cand = parse_spec(list(candidate or []) + [",".join(f"run={i}" for i in ids)])
    with store.read() as con:
        r = review(con, base, cand, window, rules, pinned)
    if require_sides:
        if r.candidate_runs.empty:
            raise SpecError(f"the candidate ({r.candidate}) matches no run in the store",
                            "list what the store holds with `compilewatch report` or the dashboard's filters")
        if r.baseline_runs.empty:
            raise SpecError(f"the baseline ({r.baseline}) matches no run in the store",
                            "list what the store holds with `compilewatch report` or the dashboard's filters")
    return r
