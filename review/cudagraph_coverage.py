"""How much of a run ran under CUDA graphs (mode="reduce-overhead"), and that change in words.

A run's coverage is its figures in ``run_metrics`` (store/run_metrics.py writes them only for runs
that recorded, skipped or split a CUDA graph): the graphs recorded, the partitions of graphs split
around ops a CUDA graph cannot hold, the skips (each with torch's reason in ``cudagraph_events``),
the per-size re-recordings, and the share of compiled calls that replayed a graph (where the hooks
watched it). The review compares a side's coverage with the other's as one change:

    CUDA-graph coverage fell from 3 graphs to 22 graphs in 4 partitions plus 11 skips

``coverage(con, run_ids)`` reads a side (its runs' medians), ``describe`` words one coverage,
``compare`` judges two and ``change_text`` words the change; none of them needs streamlit.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

FIGURES = {"cudagraph_graphs": "graphs", "cudagraph_partitions": "partitions", "cudagraph_skips": "skips",
           "cudagraph_rerecords": "rerecords", "cudagraph_replay_share": "replay_share"}
# a replay share that moved by less than this is the same coverage (warm-up calls are a share of
# the step count, which differs between runs)
SHARE_POINTS = 0.05

FELL, ROSE, CHANGED = "fell", "rose", "changed"


@dataclass(frozen=True)
class Coverage:
    graphs: int = 0                    # CUDA graphs recorded
    partitions: int = 0                # partitions of split graphs (0: none split)
    skips: int = 0                     # graphs torch ran without CUDA graphs, with a reason in the log
    rerecords: int = 0                 # re-recording warnings (a graph per input size)
    replay_share: float | None = None  # compiled calls that replayed a graph / compiled calls; None: not watched
    runs: int = 1                      # runs behind the figures (a side's medians)


def _plural(n: int, one: str, many: str | None = None) -> str:
    if n == 1:
        return f"1 {one}"
    return f"{n:,} {many or one + 's'}"


def describe(c: Coverage | None) -> str:
    """One coverage in words: "1 graph", "2 partitions plus a skip", "no CUDA graph plus 11 skips",
    with the replayed share when the hooks measured it."""
    if c is None:
        return "no CUDA graphs used"
    if c.graphs and c.partitions:
        text = f"{_plural(c.graphs, 'graph')} in {_plural(c.partitions, 'partition')}"
    elif c.partitions:
        text = _plural(c.partitions, "partition")
    elif c.graphs:
        text = _plural(c.graphs, "graph")
    else:
        text = "no CUDA graph"
    if c.skips:
        text += " plus a skip" if c.skips == 1 else f" plus {c.skips:,} skips"
    if c.rerecords:
        text += f", re-recorded per input size ({_plural(c.rerecords, 'warning')})"
    if c.replay_share is not None:
        text += f", {100 * c.replay_share:.0f}% of compiled calls replayed"
    return text


def compare(baseline: Coverage | None, candidate: Coverage | None) -> str | None:
    """FELL, ROSE or CHANGED (worse, better, both at once), None when the coverage is the same.
    Worse: more skips, more partitions, more re-recordings, a replayed share lower by
    SHARE_POINTS or more, or graphs gone altogether."""
    if baseline == candidate or (baseline is None and candidate is None):
        return None
    b, c = baseline or Coverage(), candidate or Coverage()
    worse = better = False
    for field in ("skips", "partitions", "rerecords"):
        old, new = getattr(b, field), getattr(c, field)
        worse |= new > old
        better |= new < old
    if b.replay_share is not None and c.replay_share is not None:
        moved = c.replay_share - b.replay_share
        worse |= moved <= -SHARE_POINTS
        better |= moved >= SHARE_POINTS
    worse |= bool(b.graphs) and not c.graphs
    better |= bool(c.graphs) and not b.graphs
    if worse and better:
        return CHANGED
    if worse:
        return FELL
    if better:
        return ROSE
    # graphs alone moved (more sizes recorded, another step count): the same coverage
    return CHANGED if (b.graphs != c.graphs) else None


def change_text(baseline: Coverage | None, candidate: Coverage | None) -> str | None:
    """"CUDA-graph coverage fell from 1 graph to 2 partitions plus a skip", or None when the
    two are the same."""
    how = compare(baseline, candidate)
    if how is None:
        return None
    verb = {FELL: "fell", ROSE: "rose", CHANGED: "changed"}[how]
    return f"CUDA-graph coverage {verb} from {describe(baseline)} to {describe(candidate)}"


def run_coverages(con, run_ids) -> dict[str, Coverage]:
    """Each run's coverage, for the runs of ``run_ids`` that used CUDA graphs."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = con.execute(
        "SELECT run_id, metric, value FROM run_metrics WHERE subject = '' AND metric IN (SELECT unnest(?::VARCHAR[])) "
        "AND run_id IN (SELECT unnest(?::VARCHAR[]))", [list(FIGURES), ids]).fetchall()
    figures: dict[str, dict] = {}
    for run_id, metric, value in rows:
        figures.setdefault(run_id, {})[FIGURES[metric]] = value
    # cudagraph_skips is written for every run with a log: a run is in coverage only when it used
    # CUDA graphs (the coverage metrics are written), or skipped them
    return {r: _coverage(f) for r, f in figures.items()
            if set(f) - {"skips"} or f.get("skips")}


def _coverage(f: dict, runs: int = 1) -> Coverage:
    return Coverage(graphs=int(f.get("graphs") or 0), partitions=int(f.get("partitions") or 0),
                    skips=int(f.get("skips") or 0), rerecords=int(f.get("rerecords") or 0),
                    replay_share=f.get("replay_share"), runs=runs)


def coverage(con, run_ids) -> Coverage | None:
    """A side's coverage: the median of each figure over its runs that used CUDA graphs (counts
    rounded down), None when none did."""
    per_run = list(run_coverages(con, run_ids).values())
    if not per_run:
        return None
    shares = [c.replay_share for c in per_run if c.replay_share is not None]
    med = {name: int(statistics.median_low([getattr(c, name) for c in per_run]))
           for name in ("graphs", "partitions", "skips", "rerecords")}
    return Coverage(**med, replay_share=statistics.median(shares) if shares else None, runs=len(per_run))


def side_change(con, baseline_run_ids, candidate_run_ids) -> str | None:
    """The change between two sides' coverage in words (change_text), None when the same or when
    neither side used CUDA graphs."""
    return change_text(coverage(con, baseline_run_ids), coverage(con, candidate_run_ids))


def by_model(con, baseline_runs, candidate_runs) -> list[dict]:
    """Per model and hardware of the candidate runs (frames with run_id, model, hardware, as a
    Review holds them) that used CUDA graphs on either side: its baseline and candidate coverage
    in words and the change (None when the same). What `check` prints and its JSON carries."""
    out = []
    if candidate_runs is None or candidate_runs.empty:
        return out
    groups = sorted(set(zip(candidate_runs["model"], candidate_runs["hardware"])))
    for model, hardware in groups:
        def ids(runs):
            if runs is None or runs.empty:
                return []
            return list(runs[(runs["model"] == model) & (runs["hardware"] == hardware)]["run_id"])
        base, cand = coverage(con, ids(baseline_runs)), coverage(con, ids(candidate_runs))
        if base is None and cand is None:
            continue
        out.append({"model": model, "hardware": hardware, "baseline": describe(base) if base else None,
                    "candidate": describe(cand), "change": change_text(base, cand) if base else None,
                    "direction": compare(base, cand) if base else None})
    return out


def from_summary(figures: dict) -> Coverage:
    """The coverage `compilewatch summarize` counted (its "cudagraphs" object) over the paths given."""
    return Coverage(graphs=figures.get("graphs") or 0, partitions=figures.get("partitions") or 0,
                    skips=figures.get("skips") or 0, rerecords=figures.get("rerecords") or 0,
                    replay_share=figures.get("replay_share"))
