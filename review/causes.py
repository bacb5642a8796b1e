"""Why each regression moved, from what the store already holds: one sentence and its parts.

Read only for the verdicts that got worse (regressions and suspicious changes), once per model x
hardware, on a few runs: the newest baseline run and the candidate run that was flagged for the
compile diff, both sides' runs for the compile phases and the ranks. The parts:

- ``compile_phase``: for compile time, the frame whose compile grew most and the phase that grew
  (tracing, AOT, Inductor, autotuning, backward), with the cache state on both sides;
- ``graphs``: the compiled graphs that changed (their fingerprints) and, for the busiest changed
  frame, the compile diff in words: ops and kernels added or removed, guards added, changed or moved;
- ``cache_miss``: which part of the compile cache's key differed where the candidate missed;
- ``ranks``: in a multi-rank job, the ranks that carry the change;
- ``setting``: a recorded setting that differs between the sides;
- ``cudagraphs``: for CUDA-graph verdicts, the coverage on both sides ("fell from 1 graph to 2
  partitions plus a skip");
- ``trade``: what moved the other way in the same runs (slower, but less memory).

Each source degrades alone: a store without fingerprints, settings or cache keys gives the parts it
can. ``review/wording.py`` says the sentence wherever a verdict is read.
"""
from __future__ import annotations

import dataclasses
import math

import pandas as pd

from compilewatch.review import series as S
from compilewatch.review.metrics import COMPILE_METRICS, fmt
from compilewatch.review.metrics import metric as metric_of
from compilewatch.review.regressions import IMPROVEMENT, WORSE, Cause, CausePart, Verdict
from compilewatch.store.compile_time import per_compile
from compilewatch.store.run_filter import runs_among, runs_param

# which parts say most about each kind of verdict, first first
ORDER = {
    "compile_time": ("setting", "cache_miss", "compile_phase", "graphs", "ranks"),
    "time_to_first_step": ("setting", "cache_miss", "compile_phase", "graphs", "ranks"),
    "timing": ("setting", "graphs", "ranks"),
    "count": ("cudagraphs", "ranks", "graphs", "setting"),
    "key": ("cudagraphs", "ranks"),        # a new key's own evidence already says what and where
}
# compile phases as rollup_compile_time keeps them, with their names in words
PHASES = (("tracing_s", "tracing"), ("aot_s", "AOT"), ("inductor_s", "Inductor"), ("autotune_s", "autotuning"),
          ("backward_s", "backward"), ("runtime_autotune_s", "runtime autotuning"))


def _order(v: Verdict) -> tuple[str, ...]:
    if v.kind:
        return ORDER["key"]
    if v.metric in ORDER:
        return ORDER[v.metric]
    return ORDER["count" if metric_of(v.metric).kind == "count" else "timing"]


def _newest_run(runs) -> str | None:
    """The newest of some RunValues (by run time, then id), the run a diff is read from."""
    if not runs:
        return None
    from datetime import datetime
    return max(runs, key=lambda r: (r.run_time or datetime.min, r.run_id)).run_id


def _frame_name(co_name, co_file, line) -> str:
    where = f" ({co_file}:{int(line)})" if isinstance(co_file, str) and co_file and line == line and line is not None else ""
    return f"{co_name or '?'}{where}"


def compile_phase_part(con, base_ids: list[str], cand_ids: list[str], states: tuple[str, str]) -> CausePart | None:
    """The frame whose compile time grew most between the sides (median per run), and the phase of
    it that grew most; ``states`` the cache state of each side."""
    ids = list(base_ids) + list(cand_ids)
    if not ids:
        return None
    cols = S.df(con, "SELECT * FROM rollup_compile_time LIMIT 0").columns
    phases = [(c, name) for c, name in PHASES if c in cols]
    sums = ", ".join(f"sum(coalesce({c}, 0)) AS {c}" for c, _ in phases)
    rows = S.df(con, f"""SELECT run_id, co_name, co_file, co_firstlineno, sum(coalesce(total_s, 0)) AS total_s, {sums}
                         FROM rollup_compile_time WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""", [ids])
    if rows.empty:
        return None
    rows["side"] = ["candidate" if r in set(cand_ids) else "baseline" for r in rows["run_id"]]
    n = {"baseline": max(1, len(base_ids)), "candidate": max(1, len(cand_ids))}
    key = ["co_name", "co_file", "co_firstlineno"]
    # a frame a run did not compile counts 0 for it: the per-side mean over the side's runs
    per = rows.groupby(key + ["side"], dropna=False)[["total_s"] + [c for c, _ in phases]].sum().reset_index()
    per[["total_s"] + [c for c, _ in phases]] = per[["total_s"] + [c for c, _ in phases]].div(
        per["side"].map(n), axis=0)
    wide = per.pivot_table(index=key, columns="side", values=["total_s"] + [c for c, _ in phases],
                           aggfunc="sum", fill_value=0.0, dropna=False)
    if ("total_s", "candidate") not in wide.columns:
        return None
    base_total = wide[("total_s", "baseline")] if ("total_s", "baseline") in wide.columns else 0.0
    grew = (wide[("total_s", "candidate")] - base_total).sort_values(ascending=False)
    if grew.empty or not grew.iloc[0] > 0:
        return None
    frame = grew.index[0]
    row = wide.loc[frame]

    def side(col, s):
        return float(row[(col, s)]) if (col, s) in row.index else 0.0
    growth = sorted(((side(c, "candidate") - side(c, "baseline"), name, c) for c, name in phases), reverse=True)
    grown = [(d, name) for d, name, _ in growth if d > 0.05 * max(grew.iloc[0], 1e-9)][:2]
    b, c = side("total_s", "baseline"), side("total_s", "candidate")
    name = _frame_name(*frame)
    phase_text = ", ".join(f"{n} {fmt(d, 's').replace(' s', '')} s longer" for d, n in grown) or "no one phase"
    text = (f"{name} compiles {fmt(b, 's')} → {fmt(c, 's')}: {phase_text} "
            f"(cache {states[0]} in the baseline, {states[1]} in the candidate)")
    return CausePart("compile_phase", text, {
        "co_name": frame[0], "co_file": frame[1],
        "co_firstlineno": None if frame[2] != frame[2] or frame[2] is None else int(frame[2]),
        "baseline_s": b, "candidate_s": c,
        "phases": {cname: {"baseline": side(col, "baseline"), "candidate": side(col, "candidate")}
                   for col, cname in phases},
        "cache": {"baseline": states[0], "candidate": states[1]}})


RANK_COUNTS = (("compiles", "compiles", "compile_id IS NOT NULL"), ("recompiles", "recompiles", "TRUE"),
               ("graph_breaks", "graph_breaks", "TRUE"), ("limit_hits", "limit_hits", "TRUE"))


def rank_counts_long(con, run_ids: list[str]) -> pd.DataFrame:
    """Per run and rank: compiles, recompiles, graph breaks, limit hits and compile seconds, in long
    form (run_id, rank, what, n). One run's rows are the same whichever other runs were asked with
    it, so one read serves every group of a review."""
    cols = ["run_id", "rank", "what", "n"]
    if not run_ids:
        return pd.DataFrame(columns=cols)
    flt = runs_among(run_ids)     # $1
    sqls = [f"SELECT run_id, rank, '{name}' AS what, count(*)::DOUBLE AS n FROM {table} "
            f"WHERE {flt} AND {cond} GROUP BY ALL"
            for name, table, cond in RANK_COUNTS]
    # a rank's compile seconds as run_metrics.compile_time counts them (forward + backward + runtime autotuning)
    sqls.append("SELECT run_id, rank, 'compile_s' AS what, sum(coalesce(total_s, 0)) AS n FROM "
                f"({per_compile(flt)}) GROUP BY ALL")
    # One statement each: as one UNION ALL, a few thousand runs (a week's review asks for all its
    # groups at once) took DuckDB minutes where each part alone takes under a second.
    frames = [S.df(con, sql, [runs_param(run_ids)]) for sql in sqls]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def pivot_rank_counts(long: pd.DataFrame) -> pd.DataFrame:
    """A column per figure. Pivoted per group, never for several at once: the pivot fills every
    (run, rank) pair of the runs it is given, so a one-rank run pivoted beside an 8-rank job's
    runs would gain seven empty ranks."""
    if long.empty:
        return pd.DataFrame(columns=["run_id", "rank"])
    return long.pivot_table(index=["run_id", "rank"], columns="what", values="n", aggfunc="sum",
                            fill_value=0.0, dropna=False).reset_index()


RANK_METRIC = {"recompiles": "recompiles", "new_recompiling_function": "recompiles", "new_guard_category": "recompiles",
               "graph_breaks": "graph_breaks", "new_graph_break": "graph_breaks", "limit_hits": "limit_hits",
               "new_limit_hit": "limit_hits", "compile_time": "compile_s", "time_to_first_step": "compile_s"}


def ranks_part(counts: pd.DataFrame, base_ids: list[str], cand_ids: list[str], v: Verdict) -> CausePart | None:
    """In a multi-rank job, the ranks whose figure for this verdict rose while the others' did not."""
    what = RANK_METRIC.get(v.kind or v.metric)
    if what is None or counts.empty or what not in counts.columns:
        return None
    cand = counts[counts["run_id"].isin(cand_ids)]
    if cand["rank"].nunique(dropna=True) < 2:
        return None
    base = counts[counts["run_id"].isin(base_ids)]
    c_by = cand.groupby("rank")[what].median()
    b_by = base.groupby("rank")[what].median() if len(base) else pd.Series(dtype=float)
    rise = {int(r): (float(b_by.get(r, 0.0)), float(c)) for r, c in c_by.items() if r == r}
    unit_s = what == "compile_s"

    def grew(b, c):
        return c > b * 1.15 + (0.5 if unit_s else 0)
    up = sorted(r for r, (b, c) in rise.items() if grew(b, c))
    if not up or len(up) == len(rise):
        return None
    label = what.replace("_s", " time").replace("_", " ")

    def show(x):
        return fmt(x, "s") if unit_s else f"{x:g}"
    moved = ", ".join(f"rank {r}: {label} {show(rise[r][0])} → {show(rise[r][1])}" for r in up)
    still = ", ".join(f"rank {r} {show(rise[r][1])}" for r in sorted(rise) if r not in up)
    text = f"rank{'s' * (len(up) > 1)} {', '.join(map(str, up))} alone ({moved}; {still})"
    return CausePart("ranks", text, {"ranks": up, "figure": what,
                                     "per_rank": {str(r): {"baseline": b, "candidate": c} for r, (b, c) in rise.items()}})


def trade_part(v: Verdict, improvements: list[Verdict]) -> CausePart | None:
    """What moved the other way in the same runs: slower, but less memory (or the reverse)."""
    # a trade is time for memory or memory for time: a faster helper beside a slower step is not one
    time_like = {"step_time", "iteration_time", "speedup", "latency"}
    wanted = {"peak_memory", "compression_ratio"} if v.metric in time_like else (
        time_like if v.metric in ("peak_memory", "compression_ratio") else set())
    others = [i for i in improvements if not i.kind and i.metric in wanted and i.change is not None
              and not math.isinf(i.change)]
    if not others:
        return None
    best = max(others, key=lambda i: abs(i.change))
    label = metric_of(best.metric).label.split(" (")[0].lower()
    if best.subject:     # which figure moved: on the CPU the heap in use, not the resident set
        label += f" ({best.subject})"
    text = f"{label} {100 * best.change:+.0f}% in the same runs"
    return CausePart("trade", text, {"metric": best.metric, "subject": best.subject, "change": best.change})


def sentence(v: Verdict, parts: list[CausePart]) -> str:
    """The cause in one sentence: the ranks that carry it (in a multi-rank job, where it happened says
    as much as what happened, so it is never crowded out), the two parts that say most for this kind
    of verdict, then the trade."""
    by = {p.kind: p for p in parts}
    main = [by[k].text for k in _order(v) if k in by and k != "ranks"][:2]
    if "ranks" in by:
        main.insert(0, by["ranks"].text)
    text = "; ".join(main)
    if "trade" in by:
        text = (text + "; " if text else "") + "the trade: " + by["trade"].text
    return text


def attach(con, verdicts: list[Verdict], cache_states: dict[str, str], extra=None) -> list[Verdict]:
    """The verdicts with a cause on each regression and suspicious change; ``cache_states`` is each
    run's compile-cache state (cold, warm, unknown). ``extra(model, hardware, base_ids, cand_ids,
    base_run, cand_run) -> list[CausePart]`` adds the parts other sources know (graphs, settings,
    cache keys) once per model x hardware."""
    worse_groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        if v.status in WORSE:
            worse_groups.setdefault((v.model, v.hardware), []).append(v)
    if not worse_groups:
        return verdicts
    improvements = {}
    for v in verdicts:
        if v.status == IMPROVEMENT:
            improvements.setdefault((v.model, v.hardware), []).append(v)
    caused: dict[int, Verdict] = {}
    # Per-rank counts of every group that asks for them, in one statement: a statement a group scanned
    # the event tables each time (10-12 s of a week's review at 100,000 runs). A run's rows are the
    # same whichever other runs the statement read.
    counted = {key for key, group in worse_groups.items() if any(RANK_METRIC.get(v.kind or v.metric) for v in group)}
    asked = sorted({r for key in counted for v in worse_groups[key]
                    for side in (v.baseline, v.candidate) if side is not None for r in side.run_ids})
    all_counts = rank_counts_long(con, asked) if asked else pd.DataFrame(columns=["run_id"])
    for (model, hw), group in worse_groups.items():
        sides = [v for v in group if v.baseline is not None and v.candidate is not None]
        base_ids = sorted({r for v in sides for r in v.baseline.run_ids})
        cand_ids = sorted({r for v in sides for r in v.candidate.run_ids})
        if not cand_ids:
            continue
        flagged = [r for v in group for r in v.flagged]
        base_run = _newest_run([r for v in sides for r in v.baseline.runs])
        cand_run = flagged[-1] if flagged else _newest_run([r for v in sides for r in v.candidate.runs])
        group_parts = list(extra(model, hw, base_ids, cand_ids, base_run, cand_run)) if extra else []
        counts = (pivot_rank_counts(all_counts[all_counts["run_id"].isin(base_ids + cand_ids)])
                  if (model, hw) in counted else pd.DataFrame())
        for v in group:
            parts = [p for p in group_parts if _applies(p, v)]
            if v.metric in COMPILE_METRICS and v.baseline and v.candidate:
                b_ids, c_ids = v.baseline.run_ids, v.candidate.run_ids
                states = tuple(_states(ids, cache_states) for ids in (b_ids, c_ids))
                p = compile_phase_part(con, b_ids, c_ids, states)
                if p:
                    parts.append(p)
            if v.baseline is not None and v.candidate is not None:
                rp = ranks_part(counts, v.baseline.run_ids, v.candidate.run_ids, v)
            else:
                rp = ranks_part(counts, base_ids, list(v.flagged) or cand_ids, v)
            if rp:
                parts.append(rp)
            tp = trade_part(v, improvements.get((model, hw), []))
            if tp and not v.kind:
                parts.append(tp)
            text = sentence(v, parts)
            if not text:
                continue
            frame = next(({k: p.fields.get(k) for k in ("co_name", "co_file", "co_firstlineno")}
                          for p in parts if p.kind in ("graphs", "compile_phase") and p.fields.get("co_name")), None)
            caused[id(v)] = dataclasses.replace(v, cause=Cause(text, tuple(parts), frame))
    return [caused.get(id(v), v) for v in verdicts]


def _applies(p: CausePart, v: Verdict) -> bool:
    """A group-wide part (graphs, a setting, a cache key) speaks for the verdicts it can explain."""
    if p.kind == "cache_miss":
        return v.metric in COMPILE_METRICS
    if p.kind == "setting":
        return not v.kind
    if p.kind == "cudagraphs":
        return v.metric.startswith("cudagraph") or v.kind == "new_cudagraph_skip"
    return True


def _states(ids, cache_states: dict[str, str]) -> str:
    found = sorted({cache_states.get(r, "unknown") for r in ids})
    return "/".join(found) if found else "unknown"
