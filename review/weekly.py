"""One review: the two sides' runs, every verdict with its evidence, the change points, and the
hotspots and storms of the candidate, grouped by model and hardware (never across hardware)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import PurePath

import numpy as np
import pandas as pd

from compilewatch.ingest.formats import cudagraphs as cudagraph_hints
from compilewatch.ingest.formats.guard_text import full_path, split_guard
from compilewatch.core.errors import CompileWatchError
from compilewatch.review import cache_miss, causes, cost, cudagraph_coverage, evidence, graphs, host
from compilewatch.review import series as S
from compilewatch.review.baseline import Sides, Spec, Window, resolve_sides, spec_where, window_where
from compilewatch.review.changepoints import ChangePoint, change_points
from compilewatch.review.hints import LIMIT_HINT, guard_hint
from compilewatch.review.metrics import COMPILE_METRICS, METRICS
from compilewatch.review.regressions import (
    IMPROVEMENT,
    INSUFFICIENT,
    REGRESSION,
    SUSPICIOUS,
    UNCHANGED,
    CausePart,
    Evidence,
    RunValue,
    Verdict,
    judge_new_keys,
    judge_paired_states,
    judge_values,
)
from compilewatch.review.rules import Rules

GATED = [name for name, m in METRICS.items() if m.kind != "info"]


@dataclass(frozen=True)
class Note:
    """Something the review could not judge, and why (different hardware, no baseline)."""
    kind: str      # different_hardware | no_baseline | own_history
    model: str
    hardware: str
    text: str


@dataclass
class Review:
    baseline: str
    candidate: str
    rules: Rules
    baseline_runs: pd.DataFrame
    candidate_runs: pd.DataFrame
    verdicts: list[Verdict]
    changepoints: list[ChangePoint]
    notes: list[Note]
    values: pd.DataFrame          # long: run_id, side, model, hardware, metric, subject, value, run_time, ...
    hotspots: pd.DataFrame = field(default_factory=pd.DataFrame)
    storms: pd.DataFrame = field(default_factory=pd.DataFrame)

    def having(self, *statuses: str) -> list[Verdict]:
        """The verdicts of these statuses, worst status first, then the model x hardware whose
        regressions cost most a week (review/cost.py: the fix that pays most), then by metric."""
        order = {REGRESSION: 0, SUSPICIOUS: 1, IMPROVEMENT: 2}
        costs = cost.group_costs(self.verdicts)
        return sorted((v for v in self.verdicts if v.status in statuses),
                      key=lambda v: (order.get(v.status, 9), -costs.get((v.model, v.hardware), 0.0), v.model,
                                     v.hardware, -(v.cost_s or 0.0), v.metric, -_size(v)))

    @property
    def regressions(self) -> list[Verdict]:
        return self.having(REGRESSION)

    @property
    def suspicious(self) -> list[Verdict]:
        return self.having(SUSPICIOUS)

    @property
    def improvements(self) -> list[Verdict]:
        return self.having(IMPROVEMENT)

    @property
    def insufficient(self) -> list[Verdict]:
        return self.having(INSUFFICIENT)

    def per_model(self) -> pd.DataFrame:
        """One row per model x hardware: runs on each side and a count of verdicts by status."""
        rows = []
        groups = sorted(set(zip(self.candidate_runs.get("model", []), self.candidate_runs.get("hardware", []))))
        for model, hw in groups:
            vs = [v for v in self.verdicts if v.model == model and v.hardware == hw]
            b = self.baseline_runs
            rows.append({"model": model, "hardware": hw,
                         "baseline_runs": int(((b["model"] == model) & (b["hardware"] == hw)).sum()) if len(b) else 0,
                         "candidate_runs": int(((self.candidate_runs["model"] == model)
                                                & (self.candidate_runs["hardware"] == hw)).sum()),
                         "regressions": sum(v.status == REGRESSION for v in vs),
                         "suspicious": sum(v.status == SUSPICIOUS for v in vs),
                         "improvements": sum(v.status == IMPROVEMENT for v in vs),
                         "worse": "; ".join(sorted({v.metric for v in vs if v.status == REGRESSION}))})
        return pd.DataFrame(rows)

    def to_json(self) -> dict:
        def num(x):
            return None if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else x

        def item(v: Verdict) -> dict:
            from compilewatch.review import wording
            d = v.to_json()
            # a number where there is a ratio; otherwise the words every reader sees ("new", "gone", "0 → 3")
            finite = v.change is not None and not math.isinf(v.change) and not v.kind
            d["change"] = num(v.change) if finite else wording.change(v)
            d["what"], d["change_text"] = wording.what(v), wording.change(v)
            return d
        return {"baseline": self.baseline, "candidate": self.candidate,
                "baseline_runs": len(self.baseline_runs), "candidate_runs": len(self.candidate_runs),
                "regressions": [item(v) for v in self.regressions],
                "suspicious": [item(v) for v in self.suspicious],
                "improvements": [item(v) for v in self.improvements],
                "insufficient_data": [item(v) for v in self.insufficient],
                "changepoints": [c.to_json() for c in self.changepoints],
                "notes": [vars(n) for n in self.notes],
                "rules": vars(self.rules)}


def _size(v: Verdict) -> float:
    if v.change is None:
        return 0.0
    return 1e9 if math.isinf(v.change) else abs(v.change)


def _run_fields(row: dict) -> dict:
    """What a RunValue says of its run, from the run's record: once per run, not per metric."""
    def s(x):
        return None if _na(x) else x
    t = row["run_time"]
    return dict(run_id=row["run_id"], run_time=None if _na(t) else pd.Timestamp(t).to_pydatetime(),
                torch_version=s(row["torch_version"]), label=s(row["label"]), git_commit=s(row["git_commit"]),
                command=s(row["command"]))


def _run_value(run: dict, value_row: dict | None = None) -> RunValue:
    """One run's value of one metric: `run` from _run_fields, `value_row` a run_metrics record."""
    return RunValue(
        value=float(value_row["value"]) if value_row is not None else 0.0,
        spread=None if value_row is None or _na(value_row["spread"]) else float(value_row["spread"]),
        n=None if value_row is None or _na(value_row["n"]) else int(value_row["n"]), **run)


def _where(p: str) -> str:
    return PurePath(p).name if isinstance(p, str) and p else "?"


def _na(x):
    """Missing: None, NaN, NaT or pd.NA. Plain strings and numbers are told apart without pd.isna,
    which the judge would otherwise call a few times for each of a week's ~80,000 values."""
    if x is None:
        return True
    if isinstance(x, (str, int)):
        return False
    if isinstance(x, float):
        return x != x
    return bool(pd.isna(x))


def _describe_break(r: dict) -> Evidence:
    what = r["gb_type"] if isinstance(r["gb_type"], str) and r["gb_type"] else (r["reason"] or "graph break")
    line = "" if _na(r["user_line"]) else f":{int(r['user_line'])}"
    text = f"{what} at {_where(r['user_file'])}{line}"
    return Evidence("graph_break", text, {
        "break_key": r["key"], "gb_type": None if _na(r["gb_type"]) else r["gb_type"],
        "reason": None if _na(r["raw_reason"]) else r["raw_reason"],
        "user_file": None if _na(r["user_file"]) else r["user_file"],
        "user_line": None if _na(r["user_line"]) else int(r["user_line"]),
        "user_function": None if _na(r["user_function"]) else r["user_function"],
        "hints": None if _na(r["hints"]) else r["hints"]})


def _guard_text(raw) -> str:
    """A failed guard's expression alone: no compile-id prefix, padding, source comment or location."""
    if not isinstance(raw, str) or not raw:
        return "?"
    return split_guard(raw).expression or "?"


def _guard_fields(raw, known_file=None) -> dict:
    """The guard's expression, its source line and its whole `file:line in function`, apart."""
    g = split_guard(raw if isinstance(raw, str) else None)
    file = full_path(g.file, [known_file] if isinstance(known_file, str) else [])
    where = None if not file else f"{file}:{g.line}" + (f" in {g.function}" if g.function else "")
    return {"guard": g.expression or None, "guard_source": g.source, "guard_at": where,
            "guard_compile_id": g.compile_id, "guard_raw": raw if isinstance(raw, str) else None}


def _describe_recompile(r: dict) -> Evidence:
    where = "" if _na(r["line"]) else f" ({_where(r['file'])}:{int(r['line'])})"
    known = None if _na(r["file"]) else r["file"]
    fields = _guard_fields(r["guard"], known)
    text = f"{r['key']}{where} recompiled; failed guard: {fields['guard'] or '?'}"
    if fields["guard_at"]:
        text += f" (guarding {_where(fields['guard_at'].split(' in ')[0])}" + \
                (f": {fields['guard_source']})" if fields["guard_source"] else ")")
    return Evidence("recompile", text, {
        "function": r["key"], "file": known,
        "line": None if _na(r["line"]) else int(r["line"]), **fields,
        "category": None if _na(r["category"]) else r["category"],
        "hint": guard_hint(None if _na(r["category"]) else r["category"])})


def _describe_guard(r: dict) -> Evidence:
    return Evidence("guard_category", f"{r['key']} guard failures, e.g. {r['function']}: {_guard_text(r['guard'])}", {
        "category": r["key"], "function": r["function"], **_guard_fields(r["guard"]), "hint": guard_hint(r["key"])})


def _describe_limit(r: dict) -> Evidence:
    lim = f"{r['limit_name']} ({int(r['limit_value'])})" if not _na(r["limit_value"]) else str(r["limit_name"])
    return Evidence("limit_hit", f"{r['function']} hit {lim}", {
        "function": r["function"], "limit_name": r["limit_name"], "reason": r["reason"], "hint": LIMIT_HINT})


def _describe_cudagraph_skip(r: dict) -> Evidence:
    where = "" if _na(r["user_file"]) else f" at {_where(r['user_file'])}:{int(r['user_line'])}"
    code = "" if _na(r["user_code"]) else f" ({r['user_code']})"
    return Evidence("cudagraph_skip", f"CUDA graphs skipped due to {r['reason']}{where}{code}", {
        "category": r["category"], "reason": r["reason"], "user_file": None if _na(r["user_file"]) else r["user_file"],
        "user_line": None if _na(r["user_line"]) else int(r["user_line"]),
        "user_function": None if _na(r["user_function"]) else r["user_function"],
        "hint": cudagraph_hints.HINTS.get(r["category"], cudagraph_hints.OTHER_HINT)})


KEY_SOURCES = (("new_graph_break", S.break_keys, _describe_break),
               ("new_recompiling_function", S.recompile_keys, _describe_recompile),
               ("new_guard_category", S.guard_category_keys, _describe_guard),
               ("new_limit_hit", S.limit_keys, _describe_limit),
               ("new_cudagraph_skip", S.cudagraph_skip_keys, _describe_cudagraph_skip))


def pick_runs(con, sides: Sides, since: timedelta, models=(), hardware=(),
              run_ids=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(baseline runs, candidate runs) as frames of the runs relation. A run on both sides counts
    as candidate. With a candidate SPEC and no baseline, the baseline is the `since` before the
    candidate's first run."""
    extra, extra_params = [], []
    if models:
        extra.append("list_contains(?::VARCHAR[], rv.model)"); extra_params.append(list(models))
    if hardware:
        extra.append("list_contains(?::VARCHAR[], rv.hardware)"); extra_params.append(list(hardware))
    if run_ids is not None:
        # a semi-join: list_contains compares every run with every id (a model's year of runs: 1.6 s a side)
        extra.append("rv.run_id IN (SELECT unnest(?::VARCHAR[]))"); extra_params.append(list(run_ids))

    def select(spec: Spec, window: Window) -> pd.DataFrame:
        w1, p1 = spec_where(spec)
        w2, p2 = window_where(window)
        return S.select_runs(con, " AND ".join([w1, w2] + extra), p1 + p2 + extra_params)

    cand = select(sides.candidate, sides.candidate_window)
    if sides.candidate and not sides.baseline and len(cand):
        first = pd.Timestamp(cand["run_time"].min()).to_pydatetime()
        base = select(Spec(), Window(first - since, first))
    else:
        base = select(sides.baseline, sides.baseline_window)
    # A run on both sides belongs to the side its SPEC named (`--baseline label=v1` against the
    # last week: v1's runs are the baseline even when they ran this week); both named: the candidate.
    if sides.baseline and not sides.candidate:
        cand = cand[_not_in(cand["run_id"], base["run_id"])]
    else:
        base = base[_not_in(base["run_id"], cand["run_id"])]
    return base.reset_index(drop=True), cand.reset_index(drop=True)


def _in(ids: pd.Series, among) -> np.ndarray:
    """``ids.isin(among)`` for run ids (never null), through a Python set: an Arrow-backed column's
    isin makes an Arrow scalar of every value it is given, 0.5 s for a year's runs."""
    among = among if isinstance(among, (set, frozenset)) else set(among.tolist())
    return np.fromiter((r in among for r in ids.tolist()), dtype=bool, count=len(ids))


def _not_in(ids: pd.Series, among) -> np.ndarray:
    return ~_in(ids, among)


@dataclass
class Series:
    """What the judge needs, read from the store once: both sides' runs, the model x hardware groups
    (run ids per side), the per-run metric values and keys. Judging it does no I/O."""
    base: pd.DataFrame
    cand: pd.DataFrame
    all_runs: pd.DataFrame
    groups: dict[tuple[str, str], dict[str, list[str]]]
    notes: list[Note]
    values: pd.DataFrame
    keys: dict[str, pd.DataFrame]


def judged_ids(groups: dict) -> set[str]:
    """The runs of the model x hardware groups that are judged: those with runs on both sides."""
    return {r for g in groups.values() if g["baseline"] and g["candidate"] for r in g["baseline"] + g["candidate"]}


def load_series(con, sides: Sides, since: timedelta, rules: Rules, models=(), hardware=(), run_ids=None,
                with_hotspots: bool = True) -> Series:
    """The runs the sides select and, for the model x hardware groups with runs on both sides, their
    values and keys (and the candidate's keys for its hotspots and storms). With windows only, a
    model with no runs in the baseline window gets its own previous version as the baseline."""
    base, cand = pick_runs(con, sides, since, models, hardware, run_ids)
    all_runs = pd.concat([base.assign(side="baseline"), cand.assign(side="candidate")], ignore_index=True)
    notes: list[Note] = []
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}
    cand_rows: dict[tuple[str, str], list[int]] = {}   # each group's rows of cand (model and hardware are never null)
    for side, frame in (("baseline", base), ("candidate", cand)):
        for i, (rid, model, hw) in enumerate(zip(frame["run_id"].tolist(), frame["model"].tolist(),
                                                 frame["hardware"].tolist())):
            groups.setdefault((model, hw), {"baseline": [], "candidate": []})[side].append(rid)
            if side == "candidate":
                cand_rows.setdefault((model, hw), []).append(i)
    if not (sides.baseline or sides.candidate):
        for (model, hw), g in groups.items():
            if g["candidate"] and not g["baseline"]:
                split = previous_version(cand.iloc[cand_rows[(model, hw)]], rules.min_baseline_runs)
                if split is not None:
                    b_runs, c_runs, text = split
                    g["baseline"], g["candidate"] = list(b_runs["run_id"]), list(c_runs["run_id"])
                    notes.append(Note("own_history", model, hw, f"{model} on {hw}: {text}"))
    # only model x hardware groups with runs on both sides are judged: load nothing for the rest
    judged_runs = all_runs[_in(all_runs["run_id"], judged_ids(groups))]
    values = (S.run_values(con, list(judged_runs["run_id"])) if len(judged_runs)
              else pd.DataFrame(columns=S.METRIC_COLUMNS))
    values = values.merge(all_runs, on="run_id", how="inner")
    key_ids = sorted(set(judged_runs["run_id"]) | (set(cand["run_id"]) if with_hotspots else set()))
    keys = {kind: fn(con, key_ids) for kind, fn, _ in KEY_SOURCES} if key_ids else {}
    return Series(base, cand, all_runs, groups, notes, values, keys)


# what judge reads of a value row: its series, its value and the value's unit and direction (values
# carry their run's columns too, which cost more to convert than the statistics)
VALUE_COLUMNS = ["run_id", "model", "hardware", "metric", "subject", "value", "spread", "n", "unit", "direction"]


def judge(data: Series, rules: Rules, with_changepoints: bool = True,
          facts=None) -> tuple[list[Verdict], list[ChangePoint], list[Note]]:
    """Every verdict, change point and note for the loaded series. No I/O of its own: ``facts``
    (a ``GroupFacts``) reads what the host rule needs (graphs, settings) only for the model x
    hardware groups whose timings moved."""
    notes = list(data.notes)
    verdicts: list[Verdict] = []
    cps: list[ChangePoint] = []
    values, groups = data.values, data.groups
    hit_rate = dict(values.loc[values["metric"] == "cache_hit_rate", ["run_id", "value"]].itertuples(index=False))
    # plain records from here on: per-row pandas access costs more than the statistics; of the judged
    # groups' runs alone, the only ones read below
    runs = data.all_runs
    run_rec = {r["run_id"]: _run_fields(r) for r in S.records(runs[_in(runs["run_id"], judged_ids(groups))])}
    series_values: dict[tuple, dict[str, dict]] = {}
    for rec in S.records(values.loc[values["metric"].isin(GATED + [host.PROBE]), VALUE_COLUMNS]):
        series_values.setdefault((rec["model"], rec["hardware"], rec["metric"], rec["subject"]), {})[rec["run_id"]] = rec
    by_group_series: dict[tuple[str, str], list[tuple]] = {}
    for k in sorted(series_values):
        by_group_series.setdefault(k[:2], []).append(k)
    key_recs: dict[str, dict[str, list[dict]]] = {}
    for kind, frame in data.keys.items():
        per_run: dict[str, list[dict]] = {}
        for rec in S.records(frame):
            per_run.setdefault(rec["run_id"], []).append(rec)
        key_recs[kind] = per_run
    hosts: list[host.Group] = []
    pending: list[tuple] = []     # (model, hw, b_ids, c_ids, probe): the host rule's groups, judged last
    base_hw_by_model: dict[str, set[str]] = {}
    for model, hw in zip(data.base["model"], data.base["hardware"]):
        base_hw_by_model.setdefault(model, set()).add(hw)

    for (model, hw) in sorted(k for k, g in groups.items() if g["candidate"]):
        b_ids, c_ids = groups[(model, hw)]["baseline"], groups[(model, hw)]["candidate"]
        if not b_ids:
            notes.append(_not_compared(model, hw, sorted(base_hw_by_model.get(model, set()))))
            continue
        probe = None
        for key in by_group_series.get((model, hw), []):
            _, _, metric, subject = key
            by_run = series_values[key]
            b_vals = [_run_value(run_rec[r], by_run[r]) for r in b_ids if r in by_run]
            c_vals = [_run_value(run_rec[r], by_run[r]) for r in c_ids if r in by_run]
            if not c_vals:
                continue
            first = next(iter(by_run.values()))
            unit = first["unit"] if isinstance(first["unit"], str) else None
            direction = first["direction"] if isinstance(first["direction"], str) else None
            if metric == host.PROBE:
                # evidence about the machine for the host rule, never a verdict of its own
                probe = judge_values(model, hw, metric, subject, b_vals, c_vals, rules, unit, direction)
                continue
            if metric in COMPILE_METRICS:
                found = _compile_time_verdicts(model, hw, metric, subject, b_vals, c_vals, rules, unit, direction,
                                               hit_rate)
            else:
                found = [judge_values(model, hw, metric, subject, b_vals, c_vals, rules, unit, direction)]
            verdicts += [_with_command(v) if v.status in (REGRESSION, SUSPICIOUS, IMPROVEMENT) else v for v in found]
            if with_changepoints and len(b_vals) + len(c_vals) >= 2 * rules.changepoint_min_size:
                cps += change_points(model, hw, metric, subject, b_vals + c_vals, rules, unit, hit_rate)
        for kind, _, describe in KEY_SOURCES:
            recs = [x for rid in b_ids + c_ids for x in key_recs.get(kind, {}).get(rid, [])]
            verdicts += judge_new_keys(kind, model, hw, b_ids, c_ids, recs, rules, describe)
        pending.append((model, hw, b_ids, c_ids, probe))
    by_group: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        by_group.setdefault((v.model, v.hardware), []).append(v)
    if facts is not None:
        # what the host rule and the causes read of the graphs, for every group that will ask, at once
        facts.prefetch(rid for model, hw, b_ids, c_ids, _ in pending
                       if any(v.status in causes.WORSE or (v.metric in host.TIMINGS and v.status in host.MOVED)
                              for v in by_group.get((model, hw), ()))
                       for rid in (*b_ids, *c_ids))
    for model, hw, b_ids, c_ids, probe in pending:
        hosts.append(_host_group(model, hw, by_group.get((model, hw), []), b_ids, c_ids, run_rec, probe, facts))
    for g in hosts:
        host.judge_host(verdicts, g, hosts)
    _attach_runs(verdicts, groups, run_rec)
    return verdicts, cps, notes


def _host_group(model, hw, verdicts, b_ids, c_ids, run_rec, probe, facts) -> host.Group:
    """What the host rule reads of one model x hardware (review/host.py): the graphs and the
    settings are read only where a timing moved."""
    def days(ids):
        return frozenset(run_rec[r]["run_time"].date() for r in ids if run_rec[r]["run_time"] is not None)
    torch_b = {run_rec[r]["torch_version"] for r in b_ids}
    torch_c = {run_rec[r]["torch_version"] for r in c_ids}
    g = host.Group(model, hw, verdicts, days(b_ids), days(c_ids), torch_b == torch_c, probe=probe)
    if facts is None or not any(v.metric in host.TIMINGS and v.status in host.MOVED for v in verdicts):
        return g
    cmp = facts.graphs(model, hw, b_ids, c_ids)
    changed = None if cmp.same is None else cmp.same is False
    text = ""
    if changed:
        names = ", ".join(f"{f.frame[0]} ({f.frame[1]}:{f.frame[2]})" for f in cmp.changed[:3])
        text = f"the compiled graphs differ between the sides ({names})"
    return dataclasses.replace(g, graphs_changed=changed, graph_text=text,
                               settings=tuple(facts.settings(model, hw, b_ids, c_ids)))


class GroupFacts:
    """What the review reads of a model x hardware group beyond its metric values, once per group
    and only when asked: whether the two sides compiled the same graphs (review/graphs.py), the
    settings that differ (review/evidence.py), and the cause parts built on them (review/causes.py)."""

    def __init__(self, con):
        self.con = con
        self._graphs: dict = {}
        self._frames: dict = {}
        self._settings: dict = {}
        self._fetched: pd.DataFrame | None = None     # prefetch's rows, sliced by frames()
        self._fetched_ids: frozenset = frozenset()

    # Past this many runs the groups read their own (a year of an organisation's runs is millions
    # of frame rows: held at once they would cost gigabytes, read a group at a time they do not)
    PREFETCH_MAX_RUNS = 20_000

    def prefetch(self, run_ids) -> None:
        """Read the fingerprints of all the runs the review will ask about in one statement (once):
        a statement a group scanned the whole rollup each time, 82 times in a week's review of a
        100,000-run store."""
        ids = sorted(set(run_ids))
        if self._fetched is None and ids and len(ids) <= self.PREFETCH_MAX_RUNS:
            self._fetched = graphs.frame_fingerprints(self.con, ids)
            self._fetched_ids = frozenset(ids)

    def frames(self, b_ids, c_ids):
        key = (tuple(b_ids), tuple(c_ids))
        if key not in self._frames:
            ids = list(b_ids) + list(c_ids)
            if self._fetched is not None and self._fetched_ids.issuperset(ids):
                # a slice keeps the statement's order (run, rank, frame), as a statement of its own would
                rows = self._fetched
                self._frames[key] = rows[rows["run_id"].isin(ids)].reset_index(drop=True)
            else:
                self._frames[key] = graphs.frame_fingerprints(self.con, ids)
        return self._frames[key]

    def graphs(self, model, hw, b_ids, c_ids):
        key = (model, hw, tuple(b_ids), tuple(c_ids))
        if key not in self._graphs:
            self._graphs[key] = graphs.compare_graphs(self.frames(b_ids, c_ids), b_ids, c_ids)
        return self._graphs[key]

    def settings(self, model, hw, b_ids, c_ids):
        key = (model, hw, tuple(b_ids), tuple(c_ids))
        if key not in self._settings:
            frame = evidence.run_settings(self.con, list(b_ids) + list(c_ids))
            self._settings[key] = evidence.settings_differ(b_ids, c_ids, frame) if len(frame) else []
        return self._settings[key]

    def cause_parts(self, model, hw, b_ids, c_ids, base_run, cand_run) -> list[CausePart]:
        """The parts of a cause that come from outside the metric values (review/causes.py)."""
        parts = []
        changes = self.settings(model, hw, b_ids, c_ids)
        if changes:
            said = "; ".join(c.sentence() for c in changes[:3]) + (f" (+{len(changes) - 3} more)" if len(changes) > 3 else "")
            parts.append(CausePart("setting", f"a setting differs: {said}",
                                   {"settings": [{"name": c.name, "source": c.source, "baseline": list(c.baseline),
                                                  "candidate": list(c.candidate)} for c in changes]}))
        cmp = self.graphs(model, hw, b_ids, c_ids)
        if cmp.same is False and cmp.changed and base_run and cand_run:
            busiest = cmp.changed[0]
            # in a multi-rank job the ranks whose own graphs changed, and the diff read on the first of them
            ranks = graphs.changed_ranks(self.frames(b_ids, c_ids), b_ids, c_ids, busiest.frame)
            try:
                change = graphs.describe_change(self.con, base_run, cand_run, busiest.frame,
                                                rank=ranks[0] if ranks else None)
            except CompileWatchError:
                change = None
            text = change.sentence if change else ""
            if not text or text.endswith("no change"):
                # the runs picked for the diff did not differ there (one rank, one side's other run):
                # say which parts the fingerprints saw change
                words = ", ".join(graphs.PART_WORDS.get(p, p) for p in busiest.parts)
                text = f"{busiest.frame[0]} ({busiest.frame[1]}:{busiest.frame[2]}): {words} differ"
            more = f" ({len(cmp.changed) - 1} more frame(s) changed)" if len(cmp.changed) > 1 else ""
            on = graphs.ranks_words(ranks, self.frames(b_ids, c_ids))
            parts.append(CausePart("graphs", f"the compiled graphs changed{on}: {text}{more}",
                                   {"co_name": busiest.frame[0], "co_file": busiest.frame[1],
                                    "co_firstlineno": busiest.frame[2], "parts": list(busiest.parts),
                                    "frames_changed": len(cmp.changed), "ranks": ranks,
                                    **graphs.change_fields(change, ranks[0] if ranks else None)}))
        coverage = cudagraph_coverage.side_change(self.con, b_ids, c_ids)
        if coverage:
            parts.append(CausePart("cudagraphs", coverage, {}))
        if base_run and cand_run:
            why = cache_miss.cause(self.con, base_run, cand_run)
            if why:
                parts.append(CausePart("cache_miss", why, {"baseline_run": base_run, "candidate_run": cand_run}))
        return parts


def _not_compared(model: str, hw: str, baseline_hardware: list[str]) -> Note:
    if baseline_hardware:
        return Note("different_hardware", model, hw,
                    f"{model}: the candidate ran on {hw}, the baseline only on {', '.join(baseline_hardware)}; "
                    f"not compared (a speedup or a step time is only comparable on the same hardware)")
    return Note("no_baseline", model, hw, f"{model} on {hw}: no baseline runs to compare with")


def review(con, baseline: Spec = Spec(), candidate: Spec = Spec(), since: timedelta = timedelta(days=7),
           rules: Rules | None = None, pinned: Spec | None = None, models=(), hardware=(),
           with_changepoints: bool = True, windows: tuple[Window, Window] | None = None,
           run_ids=None, with_hotspots: bool = True) -> Review:
    """Judge every metric and key of every model x hardware the candidate ran, against the baseline
    runs on the same hardware: the series loaded once (``load_series``), then judged with no I/O
    (``judge``). See ``baseline`` for what the SPECs and windows select; ``windows`` (baseline,
    candidate) replaces the windows `since` would give (the dashboard's date picker); ``run_ids``
    keeps both sides within those runs (the dashboard's other filters). Readers go through
    ``gate.assemble``, which takes the rules and the pinned baseline from the settings."""
    rules = rules or Rules()
    sides = resolve_sides(baseline, candidate, since, S.newest_run_time(con), pinned)
    if windows is not None:
        sides = Sides(sides.baseline, sides.candidate, Window() if sides.baseline else windows[0],
                      Window() if sides.candidate else windows[1])
    data = load_series(con, sides, since, rules, models, hardware, run_ids, with_hotspots)
    facts = GroupFacts(con)
    verdicts, cps, notes = judge(data, rules, with_changepoints, facts)
    verdicts = causes.attach(con, cost.attach(verdicts), cache_states(data.values), facts.cause_parts)
    desc_b, desc_c = sides.describe()
    return Review(desc_b, desc_c, rules, data.base, data.cand, verdicts, cps, notes, data.values,
                  hotspots=_hotspots(data.keys, data.cand) if with_hotspots else pd.DataFrame(),
                  storms=_storms(data.keys, data.cand) if with_hotspots else pd.DataFrame())


VERSION_COLUMNS = ("git_commit", "label", "torch_version", "bench")   # what version_of reads


def version_of(row) -> tuple[str, str]:
    """(what names a run's version, the version): its git commit, else the label the user gave it
    (`compilewatch collect --label v2`: a notebook or a copied script has no commit), else its torch
    version. A torch upgrade under one commit or label is a new version too. The label of a
    `compilewatch bench` run is its mode/task (a configuration, never judged against another), so it
    does not name a version."""
    commit, label, torch = (row.get(k) for k in ("git_commit", "label", "torch_version"))
    if row.get("bench") in (True, 1):   # numpy or Python bool
        label = None
    torch = torch if isinstance(torch, str) and torch else ""
    if isinstance(commit, str) and commit:
        return "commit", f"{commit}\x1f{torch}"
    if isinstance(label, str) and label:
        return "label", f"{label}\x1f{torch}"
    return "torch", torch


def previous_version(runs: pd.DataFrame, min_runs: int) -> tuple[pd.DataFrame, pd.DataFrame, str] | None:
    """A series with no runs in the baseline window is judged against its own history: the runs of
    its newest version (``version_of``: git commit, else label, else torch version) against those of
    the version before it, both inside the candidate window. Versions are ordered by their first run
    and each keeps all its runs in the window, so runs that alternate (v1, v3, v1, v3: the careful
    way to cancel host drift) are told apart as well as runs in blocks. A new team's first week, or
    the sample logs, then still get a verdict. Both sides need ``min_runs`` runs, so that a lone run
    of each version (a one-off) says nothing; a version with fewer is passed over for the one before
    it. Returns (baseline, candidate, note) or None when there is really nothing to compare with."""
    runs = runs.sort_values(["run_time", "run_id"]).reset_index(drop=True)
    named = runs[[c for c in VERSION_COLUMNS if c in runs.columns]]   # all a version is read from
    key = pd.Series([version_of(r)[1] for r in S.records(named)], dtype="string")
    order = list(dict.fromkeys(key.tolist()))          # versions by their first run, oldest first
    if len(order) < 2:
        return None
    rows = {v: np.flatnonzero((key == v).to_numpy()) for v in order}
    newest = order[-1]
    earlier = [v for v in order[:-1] if len(rows[v]) >= min_runs]
    if len(rows[newest]) < min_runs or not earlier:
        return None
    previous = earlier[-1]
    b_runs, c_runs = runs.iloc[rows[previous]], runs.iloc[rows[newest]]

    def what(row) -> str:
        commit, torch = row["git_commit"], row["torch_version"]
        label = row["label"] if isinstance(row["label"], str) else None
        parts = [f"commit {commit[:8]}" if isinstance(commit, str) and commit else None,
                 f"label {label}" if label else None,
                 f"torch {torch}" if isinstance(torch, str) and torch else None]
        return ", ".join(p for p in parts if p) or "unrecorded version"

    named_by = version_of(c_runs.iloc[0].to_dict())[0]
    by = {"commit": "git commit", "label": "label (no git commit recorded)", "torch": "torch version (no commit or label)"}
    interleaved = bool(rows[previous].max() > rows[newest].min())
    text = (f"no runs in the baseline window; its newest version ({what(c_runs.iloc[0])}, {len(c_runs)} runs) "
            f"is judged against the version before it ({what(b_runs.iloc[-1])}, {len(b_runs)} runs) in this window"
            + ("; their runs alternate in time, so each side takes all its version's runs" if interleaved else "")
            + f"; versions told apart by {by[named_by]}")
    rest = [v for v in order if v not in (newest, previous)]
    if rest:
        others = ", ".join(f"{what(runs.iloc[rows[v][0]])} ({len(rows[v])} run{'s' * (len(rows[v]) != 1)})"
                           for v in reversed(rest))
        text += f"; versions not compared here: {others}"
    return b_runs, c_runs, text


def cache_states(values: pd.DataFrame) -> dict[str, str]:
    """Each run's compile-cache state (``cache_state``) from its cache_hit_rate value."""
    rates = values.loc[values["metric"] == "cache_hit_rate", ["run_id", "value"]]
    return {rid: cache_state(rate) for rid, rate in rates.itertuples(index=False)}


def cache_state(hit_rate: float | None) -> str:
    """A run's compile-cache state from its FX graph / AOT autograd cache events: "cold" when every
    compile missed, "warm" when any hit, "unknown" when its trace has no cache events."""
    if hit_rate is None or hit_rate != hit_rate:
        return "unknown"
    return "cold" if hit_rate <= 0 else "warm"


def _compile_time_verdicts(model, hw, metric, subject, b_vals, c_vals, rules, unit, direction,
                           hit_rate) -> list[Verdict]:
    """Compile time is compared only between runs in the same cache state: a cold first run costs
    several times a warm one, so mixing them hides a version whose warm compiles got 4x slower
    behind the spread of the cold ones. Each state both sides have is its own series (subject
    "warm cache" / "cold cache"); without a shared state the runs are judged together and the
    cache rates go into the evidence (a rise that a colder cache explains is only suspicious)."""

    def split(vals):
        out: dict[str, list] = {}
        for rv in vals:
            out.setdefault(cache_state(hit_rate.get(rv.run_id)), []).append(rv)
        return out
    b_by, c_by = split(b_vals), split(c_vals)
    shared = [st for st in ("warm", "cold") if b_by.get(st) and c_by.get(st)]
    if not shared:
        v = judge_values(model, hw, metric, subject, b_vals, c_vals, rules, unit, direction)
        return [_with_cache(v, hit_rate, rules) if v.status in (REGRESSION, SUSPICIOUS, IMPROVEMENT) else v]
    if len(shared) > 1 and all(len(b_by[st]) < rules.min_baseline_runs for st in shared):
        # a version's cold first run and warm second: one run a side per state, judged together
        sub = f"{subject} {' and '.join(shared)} cache".strip()
        v = judge_paired_states(model, hw, metric, sub, {st: (b_by[st], c_by[st]) for st in shared},
                                rules, unit, direction)
        text = (f"judged within each cache state ({', '.join(shared)}): a run that missed every compile cache "
                f"only against a run that missed too, a run that hit only against one that hit")
        return [dataclasses.replace(v, evidence=v.evidence + (Evidence("cache", text, {"state": "paired"}),))]
    out = []
    for st in shared:
        sub = f"{subject} {st} cache".strip()
        v = judge_values(model, hw, metric, sub, b_by[st], c_by[st], rules, unit, direction)
        others = {k: (len(b_by.get(k, [])), len(c_by.get(k, []))) for k in ("warm", "cold", "unknown") if k != st}
        left_out = ", ".join(f"{k}: {b} baseline / {c} candidate" for k, (b, c) in others.items() if b or c)
        text = (f"compared within {st}-cache runs only ({len(b_by[st])} baseline, {len(c_by[st])} candidate; "
                f"{'every compile missed the FX graph and AOT autograd caches' if st == 'cold' else 'the compile caches hit'})"
                + (f"; runs in another cache state are judged apart ({left_out})" if left_out else ""))
        out.append(dataclasses.replace(v, evidence=v.evidence + (Evidence("cache", text, {"state": st}),)))
    return out


def _with_cache(v: Verdict, hit_rate: dict[str, float], rules: Rules) -> Verdict:
    """Say whether the compile caches hit on each side; a rise explained by a cold cache is suspicious."""
    hb = [hit_rate[r] for r in v.baseline.run_ids if r in hit_rate]
    hc = [hit_rate[r] for r in v.candidate.run_ids if r in hit_rate]
    if not hb and not hc:
        text = "no compile-cache events in these runs' traces"
    else:
        mb = sum(hb) / len(hb) if hb else None
        mc = sum(hc) / len(hc) if hc else None
        text = (f"compile caches hit {'–' if mb is None else f'{100 * mb:.0f}%'} in the baseline, "
                f"{'–' if mc is None else f'{100 * mc:.0f}%'} in the candidate")
        if v.worse and mb is not None and mc is not None and mb - mc > rules.cold_cache_drop:
            text += ": a cold cache, not a code regression"
            v = dataclasses.replace(v, status=SUSPICIOUS, summary=v.summary + " (cold compile cache)")
        elif v.status == IMPROVEMENT and mb is not None and mc is not None and mc - mb > rules.cold_cache_drop:
            # a warmer cache is no code improvement either: not reported as better
            text += ": a warmer cache, not a code improvement"
            v = dataclasses.replace(v, status=UNCHANGED, summary=v.summary + " (warm compile cache)")
    return dataclasses.replace(v, evidence=v.evidence + (Evidence("cache", text, {"baseline": hb, "candidate": hc}),))


def _with_command(v: Verdict) -> Verdict:
    runs = v.candidate.runs if v.candidate else ()
    pick = [r for r in runs if r.run_id in v.flagged] or list(runs)
    if pick and pick[-1].command:
        return dataclasses.replace(v, evidence=v.evidence + (
            Evidence("command", pick[-1].command, {"run_id": pick[-1].run_id}),))
    return v


def _attach_runs(verdicts: list[Verdict], groups: dict, run_rec: dict) -> None:
    """Key verdicts carry their runs (value 1 where the key was seen) like value verdicts do, for the
    JSON, and the command that reproduces a run that had it."""

    from compilewatch.review.regressions import Side
    for i, v in enumerate(verdicts):
        if v.baseline is not None or not v.kind:
            continue
        g = groups[(v.model, v.hardware)]
        b = [dataclasses.replace(_run_value(run_rec[r]), value=1.0 if v.status == IMPROVEMENT else 0.0)
             for r in g["baseline"]]
        c = [dataclasses.replace(_run_value(run_rec[r]), value=1.0 if r in v.flagged else 0.0) for r in g["candidate"]]
        verdicts[i] = dataclasses.replace(v, baseline=Side.of(b), candidate=Side.of(c))
        if verdicts[i].worse:
            verdicts[i] = _with_command(verdicts[i])


def _stormiest_first(k: pd.DataFrame) -> pd.DataFrame:
    """A key's rows, the run that had it most first (then by run id): the example a hotspot or storm
    shows (its reason, its failed guard) comes from that run. The keys come from SQL in no set order,
    and taking whichever row came first gave two renders of one store different example guards."""
    return k.sort_values(["count", "run_id"], ascending=[False, True], kind="stable")


def _hotspots(keys: dict, cand: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The candidate's most frequent graph breaks: what, where, count, runs, hints."""
    k = keys.get("new_graph_break")
    if k is None or k.empty:
        return pd.DataFrame(columns=["what", "where", "count", "runs", "models", "hints"])
    k = _stormiest_first(k[_in(k["run_id"], cand["run_id"])].merge(cand[["run_id", "model"]], on="run_id"))
    if k.empty:
        return pd.DataFrame(columns=["what", "where", "count", "runs", "models", "hints"])
    g = k.groupby("key").agg(count=("count", "sum"), runs=("run_id", "nunique"), models=("model", "nunique"),
                             gb_type=("gb_type", "first"), reason=("reason", "first"), user_file=("user_file", "first"),
                             user_line=("user_line", "first"), hints=("hints", "first"))
    g = g.sort_values(["count", "runs"], ascending=False).head(top).reset_index()
    g["what"] = [t if isinstance(t, str) and t else r for t, r in zip(g["gb_type"], g["reason"])]
    g["where"] = [f"{_where(f)}:{int(ln)}" if isinstance(f, str) and not pd.isna(ln) else ""
                  for f, ln in zip(g["user_file"], g["user_line"])]
    return g[["what", "where", "count", "runs", "models", "hints", "key"]]


def _storms(keys: dict, cand: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The candidate's most recompiling functions: recompiles per run, the failed guard, its fix hint."""
    k = keys.get("new_recompiling_function")
    if k is None or k.empty:
        return pd.DataFrame(columns=["function", "model", "recompiles", "runs", "guard", "guard_at", "guard_source",
                                     "category", "hint"])
    k = _stormiest_first(k[_in(k["run_id"], cand["run_id"])].merge(cand[["run_id", "model"]], on="run_id"))
    if k.empty:
        return pd.DataFrame(columns=["function", "model", "recompiles", "runs", "guard", "guard_at", "guard_source",
                                     "category", "hint"])
    g = k.groupby(["key", "model"]).agg(recompiles=("count", "sum"), runs=("run_id", "nunique"),
                                        guard=("guard", "first"), file=("file", "first"),
                                        category=("category", "first")).reset_index()
    g = g.sort_values("recompiles", ascending=False).head(top).rename(columns={"key": "function"})
    parts = [_guard_fields(raw, file) for raw, file in zip(g["guard"], g["file"])]
    g["guard"] = [p["guard"] for p in parts]
    g["guard_at"] = [p["guard_at"] for p in parts]
    g["guard_source"] = [p["guard_source"] for p in parts]
    g["hint"] = [guard_hint(c if isinstance(c, str) else None) for c in g["category"]]
    return g.drop(columns=["file"]).reset_index(drop=True)
