"""Where a Review is assembled, for every reader: ``assemble`` (the team's rules and pinned baseline
from the settings, then ``weekly.review``) serves the Overview, ``report`` and ``check``;
``run_review`` adds what the CLI takes (SPEC strings, candidate paths)."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from compilewatch.core.errors import InputError, SpecError
from compilewatch.review.baseline import Spec, Window, parse_since, parse_spec
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


def assemble(con, baseline: Spec = Spec(), candidate: Spec = Spec(), since: timedelta = timedelta(days=7), *,
             windows: tuple[Window, Window] | None = None, run_ids=None, with_changepoints: bool = True,
             with_hotspots: bool = True, rules: Rules | None = None, secrets=None) -> Review:
    """The one Review of a store connection: the rules and the pinned baseline read from the
    settings (environment, then the dashboard's secrets), the sides from the SPECs, or from
    ``windows`` (baseline, candidate) where no SPEC names them. See ``weekly.review``."""
    pinned = pinned_baseline(secrets)
    return review(con, baseline, candidate, since, rules or Rules.from_settings(secrets),
                  parse_spec(pinned) if pinned else None, windows=windows, run_ids=run_ids,
                  with_changepoints=with_changepoints, with_hotspots=with_hotspots)


def run_review(store, baseline: list[str] | None, candidate: list[str] | None, since: str | None = None,
               candidate_paths: list[str] | None = None, rules: Rules | None = None,
               require_sides: bool = False) -> Review:
    """Parse the SPECs (SpecError on a bad one), ingest candidate paths, and review. With
    ``require_sides`` (the gate) a side that selects no runs is an error, not a silent pass."""
    base, cand = parse_spec(baseline), parse_spec(candidate)
    window = parse_since(since)
    if candidate_paths:
        ids = ingest_candidate(store, candidate_paths)
        cand = parse_spec(list(candidate or []) + [",".join(f"run={i}" for i in ids)])
    with store.read() as con:
        r = assemble(con, base, cand, window, rules=rules)
    if require_sides:
        if r.candidate_runs.empty:
            raise SpecError(f"the candidate ({r.candidate}) matches no run in the store",
                            "list what the store holds with `compilewatch report` or the dashboard's filters")
        if r.baseline_runs.empty:
            raise SpecError(f"the baseline ({r.baseline}) matches no run in the store",
                            "list what the store holds with `compilewatch report` or the dashboard's filters")
    return r


def verdict_lines(result: Review, coverage: list[dict] = ()) -> list[str]:
    """The verdict as `compilewatch check` prints it, one line each: the sides, the CUDA-graph
    coverage per model (``cudagraph_coverage.by_model``), the verdicts with their evidence, what was
    not compared, and the closing line. Log text in them is raw: the terminal that prints them
    makes it safe."""
    from compilewatch.review import wording

    lines = [f"candidate: {result.candidate} ({len(result.candidate_runs)} runs) · "
             f"baseline: {result.baseline} ({len(result.baseline_runs)} runs)"]
    # before the verdicts: where the baseline window is empty, these say which runs a model's
    # verdicts were judged against instead (the report's "Judged against their previous version")
    lines += [f"  own history: {n.text}" for n in result.notes if n.kind == "own_history"]
    lines += [f"  CUDA graphs {c['model']} on {c['hardware']}: "
              + (c["change"] or f"{c['candidate']}" + (" (as the baseline)" if c["baseline"] else "")) for c in coverage]
    for title, items in (("REGRESSION", result.regressions), ("suspicious", result.suspicious),
                         ("better", result.improvements)):
        for v in items:
            lines.append(f"  {title:<10} {wording.title(v)} ({wording.change(v)}) — {v.summary}")
            if wording.cause(v):
                lines.append(f"             cause: {wording.cause(v)}")
            if wording.cost(v):
                lines.append(f"             costs: {wording.cost(v)}")
            lines += [f"             {e.kind}: {e.text}" for e in v.evidence]
    lines += [f"  not compared: {n.text}" for n in result.notes if n.kind != "own_history"]
    return lines


def closing_line(result: Review, failed: bool) -> str:
    return (f"compilewatch check {'FAILED' if failed else 'passed'}: {len(result.regressions)} regression(s), "
            f"{len(result.suspicious)} suspicious, {len(result.improvements)} improvement(s)")
