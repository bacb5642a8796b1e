"""What the compiler did differently between two runs: their subgraphs matched by name, their
compile ids matched by frame, and for each matched pair the Dynamo graph's ops, the guards, the
Inductor kernels and the compile time by phase; the subgraphs and compile ids on one side only.

Subgraphs are matched first, by the name they have in every run (deepdive/subgraphs.py: a vLLM
piece by its model, compile range and submodule, a regional subgraph by its name), and their
artifacts compared by name: vLLM's pieces carry no compile id, and a region's compile id may differ.
A compile id is matched by its frame (function, file name, first line) and its place among that
frame's compiles (the frame's first compile with the other's first, a recompile with the
recompile), so `0/0` of one run meets `0/0` of the other even when the ids were numbered
differently. Artifacts are compared after normalising what changes from run to run without a
change in the program: object ids and addresses, numbered generated names (`h_1`,
`cpp_fused_relu_0`), paths in source comments (ingest/formats/artifact_text.py, the one place for
it: the fingerprints stored at ingest are of the same normalised text). Listing a diff reads the
graphs, guards and output code of the matched compile ids and subgraphs only; ``text_diff`` reads
one artifact pair, when a reader asks.
"""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath

from compilewatch.core.errors import NotFoundError
from compilewatch.deepdive import subgraphs
from compilewatch.deepdive.artifacts import fetch, rows
from compilewatch.ingest.formats.artifact_text import comparable, graph_ops, guard_set, kernels, normalise
from compilewatch.store.compile_match import frame_of, match, pick_rank
from compilewatch.store.compile_time import per_compile

# "total" is what the job waited for the compile (store/compile_time.py): the forward's frame
# compile, the backward compile and the runtime autotuning; the forward's phases beside them
PHASES = (("total_s", "total"), ("entire_frame_compile_time_s", "forward"),
          ("backend_compile_time_s", "backend (AOT + Inductor)"),
          ("inductor_compile_time_s", "Inductor"), ("code_gen_time_s", "code generation"),
          ("autotune_time_s", "autotuning"), ("backward_s", "backward"), ("runtime_autotune_s", "runtime autotuning"))
GRAPH_KINDS = ("dynamo_output_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph")


@dataclass
class Compile:
    compile_id: str
    frame: tuple[str, str, int | None]    # function, file name, first line
    nth: int                              # 0: the frame's first compile in its run, 1: its first recompile ...
    phases: dict[str, float | None]
    graph_ops: int | None
    artifacts: dict[str, tuple[int, int]] = field(default_factory=dict)   # kind -> (file_id, line_no), the last


@dataclass
class PairDiff:
    frame: tuple[str, str, int | None]
    nth: int
    baseline_id: str
    candidate_id: str
    ops_added: dict[str, int]
    ops_removed: dict[str, int]
    guards_added: list[str]
    guards_removed: list[str]
    kernels_added: dict[str, int]
    kernels_removed: dict[str, int]
    kernel_count: tuple[int, int]
    graphs_changed: list[str]             # artifact kinds whose normalised text differs
    phases: dict[str, tuple[float | None, float | None]]

    @property
    def changed(self) -> bool:
        return bool(self.ops_added or self.ops_removed or self.guards_added or self.guards_removed
                     or self.kernels_added or self.kernels_removed or self.graphs_changed)

    def to_json(self) -> dict:
        return {"frame": {"function": self.frame[0], "file": self.frame[1], "line": self.frame[2]}, "nth": self.nth,
                "baseline_compile_id": self.baseline_id, "candidate_compile_id": self.candidate_id,
                "changed": self.changed, "ops_added": self.ops_added, "ops_removed": self.ops_removed,
                "guards_added": self.guards_added, "guards_removed": self.guards_removed,
                "kernels_added": self.kernels_added, "kernels_removed": self.kernels_removed,
                "kernel_count": {"baseline": self.kernel_count[0], "candidate": self.kernel_count[1]},
                "graphs_changed": self.graphs_changed,
                "compile_time_s": {name: {"baseline": a, "candidate": b} for name, (a, b) in self.phases.items()}}


@dataclass
class SubgraphDiff:
    key: tuple
    label: str
    baseline_ids: list[str]
    candidate_ids: list[str]
    artifacts_added: list[str]            # artifact names on the candidate's side only
    artifacts_removed: list[str]
    artifacts_changed: list[str]          # on both sides, normalised text differs

    @property
    def changed(self) -> bool:
        return bool(self.artifacts_added or self.artifacts_removed or self.artifacts_changed)

    def to_json(self) -> dict:
        return {"subgraph": self.label, "kind": self.key[0], "key": list(self.key), "changed": self.changed,
                "baseline_compile_ids": self.baseline_ids, "candidate_compile_ids": self.candidate_ids,
                "artifacts_added": self.artifacts_added, "artifacts_removed": self.artifacts_removed,
                "artifacts_changed": self.artifacts_changed}


@dataclass
class RunDiff:
    baseline_run: str
    candidate_run: str
    pairs: list[PairDiff]
    only_baseline: list[Compile]
    only_candidate: list[Compile]
    subgraphs: list[SubgraphDiff] = field(default_factory=list)
    subgraphs_only_baseline: list[subgraphs.Subgraph] = field(default_factory=list)
    subgraphs_only_candidate: list[subgraphs.Subgraph] = field(default_factory=list)

    def to_json(self) -> dict:
        def one(c: Compile) -> dict:
            return {"compile_id": c.compile_id, "function": c.frame[0], "file": c.frame[1], "line": c.frame[2],
                    "nth": c.nth, "compile_time_s": c.phases.get("total")}

        def sub(s: subgraphs.Subgraph) -> dict:
            return {"subgraph": s.label, "kind": s.kind, "key": list(s.key), "compile_ids": s.compile_ids,
                    "artifacts": list(s.places())}
        return {"baseline_run": self.baseline_run, "candidate_run": self.candidate_run,
                "subgraphs": [p.to_json() for p in self.subgraphs],
                "subgraphs_only_baseline": [sub(s) for s in self.subgraphs_only_baseline],
                "subgraphs_only_candidate": [sub(s) for s in self.subgraphs_only_candidate],
                "pairs": [p.to_json() for p in self.pairs],
                "only_baseline": [one(c) for c in self.only_baseline],
                "only_candidate": [one(c) for c in self.only_candidate]}


def _compiles(con, run_id: str, rank: int | None) -> list[Compile]:
    rank = pick_rank(con, run_id, rank)
    found = rows(con, f"""
        SELECT compile_id, any_value(co_name) AS fn, any_value(co_filename) AS file, any_value(co_firstlineno) AS line,
               min(frame_id) AS frame_id, min(frame_compile_id) AS fcid, min(attempt) AS attempt,
               {', '.join(f'max({c}) AS {c}' for c, _ in PHASES)}, max(graph_op_count) AS ops, min(line_no) AS first
        FROM ({per_compile("run_id = ?")}) WHERE has_forward AND compile_id IS NOT NULL AND rank IS NOT DISTINCT FROM ?
        GROUP BY compile_id ORDER BY frame_id NULLS LAST, fcid NULLS LAST, attempt NULLS LAST, first""",
                 [run_id, run_id, rank])
    arts = rows(con, "SELECT compile_id, kind, file_id, line_no FROM artifacts WHERE run_id = ? "
                     "AND rank IS NOT DISTINCT FROM ? AND kind IN ('dynamo_output_graph', 'aot_forward_graph', "
                     "'aot_backward_graph', 'aot_inference_graph', 'inductor_output_code', 'dynamo_cpp_guards_str', "
                     "'dynamo_guards') ORDER BY file_id, line_no", [run_id, rank])
    by_id: dict[str, dict[str, list]] = {}
    for a in arts:
        by_id.setdefault(a["compile_id"], {}).setdefault(a["kind"], []).append((a["file_id"], a["line_no"]))
    seen: Counter = Counter()
    out = []
    for r in found:
        frame = frame_of(r["fn"], r["file"], r["line"])
        phases = {name: (None if r[col] is None else float(r[col])) for col, name in PHASES}
        c = Compile(r["compile_id"], frame, seen[frame], phases, r["ops"])
        # several inductor_output_code per compile id (forward, backward): kept in order, keyed apart
        for kind, places in by_id.get(r["compile_id"], {}).items():
            for i, place in enumerate(places):
                c.artifacts[kind if i == 0 else f"{kind}#{i + 1}"] = place
        seen[frame] += 1
        out.append(c)
    return out


def _text(con, run_id: str, place: tuple[int, int] | None) -> str:
    return fetch(con, run_id, *place).pretty() if place else ""


def _counter_diff(a: Counter, b: Counter) -> tuple[dict[str, int], dict[str, int]]:
    return dict(sorted((b - a).items())), dict(sorted((a - b).items()))


def _pair(con, base_run: str, cand_run: str, a: Compile, b: Compile) -> PairDiff:
    texts = {}
    kinds = sorted(set(a.artifacts) | set(b.artifacts))
    for kind in kinds:
        texts[kind] = (_text(con, base_run, a.artifacts.get(kind)), _text(con, cand_run, b.artifacts.get(kind)))
    ops_a = graph_ops(texts.get("dynamo_output_graph", ("", ""))[0])
    ops_b = graph_ops(texts.get("dynamo_output_graph", ("", ""))[1])
    guard_kind = "dynamo_cpp_guards_str" if "dynamo_cpp_guards_str" in texts else "dynamo_guards"
    g_a, g_b = (guard_set(t) for t in texts.get(guard_kind, ("", "")))
    k_a, k_b = Counter(), Counter()
    for kind, (ta, tb) in texts.items():
        if kind.startswith("inductor_output_code"):
            k_a += kernels(ta)
            k_b += kernels(tb)
    ops_added, ops_removed = _counter_diff(ops_a, ops_b)
    k_added, k_removed = _counter_diff(k_a, k_b)
    shown = GRAPH_KINDS + ("inductor_output_code",)   # the order a reader walks: Dynamo, AOT, Inductor
    graphs_changed = sorted((k for k in kinds if k.split("#")[0] in shown
                             and comparable(k.split("#")[0], texts[k][0]) != comparable(k.split("#")[0], texts[k][1])),
                            key=lambda k: (shown.index(k.split("#")[0]), k))
    return PairDiff(a.frame, a.nth, a.compile_id, b.compile_id, ops_added, ops_removed,
                    sorted(g_b - g_a), sorted(g_a - g_b), k_added, k_removed,
                    (sum(k_a.values()), sum(k_b.values())), graphs_changed,
                    {name: (a.phases.get(name), b.phases.get(name)) for _, name in PHASES})


def diff_runs(con, baseline_run: str, candidate_run: str, rank: int | None = None,
              frame: tuple[str, str, int | None] | None = None) -> RunDiff:
    """Match the two runs' compile ids by frame and order, and say what differs in each pair.
    `frame` (function, file name, first line of either side): that frame's pairs and one-sided
    compile ids alone, the other frames' artifacts and the subgraphs left unread."""
    for rid in (baseline_run, candidate_run):
        if not rows(con, "SELECT 1 FROM runs WHERE run_id = ?", [rid]):
            raise NotFoundError(f"no run {rid} in the store", "list runs with `compilewatch stats` or the dashboard")
    # a frame's diff leaves the subgraphs out: their artifacts are of other compile ids than the frame's
    sub_a, sub_b = (([], []) if frame is not None else
                    (subgraphs.collect(con, baseline_run, rank), subgraphs.collect(con, candidate_run, rank)))
    sub_pairs = subgraphs.match(sub_a, sub_b)
    sub_paired_a, sub_paired_b = {id(a) for a, _ in sub_pairs}, {id(b) for _, b in sub_pairs}
    a_list, b_list = _compiles(con, baseline_run, rank), _compiles(con, candidate_run, rank)
    matched = match(a_list, b_list)
    if frame is not None:
        frame = tuple(frame)
        matched = [(a, b) for a, b in matched if frame in (a.frame, b.frame)]
        a_list = [c for c in a_list if c.frame == frame or any(c is a for a, _ in matched)]
        b_list = [c for c in b_list if c.frame == frame or any(c is b for _, b in matched)]
    paired_a, paired_b = {id(a) for a, _ in matched}, {id(b) for _, b in matched}
    return RunDiff(baseline_run, candidate_run, [_pair(con, baseline_run, candidate_run, a, b) for a, b in matched],
                   [c for c in a_list if id(c) not in paired_a], [c for c in b_list if id(c) not in paired_b],
                   [_subgraph_pair(con, baseline_run, candidate_run, a, b) for a, b in sub_pairs],
                   [s for s in sub_a if id(s) not in sub_paired_a], [s for s in sub_b if id(s) not in sub_paired_b])


def _subgraph_pair(con, base_run: str, cand_run: str, a: subgraphs.Subgraph, b: subgraphs.Subgraph) -> SubgraphDiff:
    """One subgraph in both runs: which of its artifacts (by name, in order) are on one side only,
    and which differ once normalised."""
    pa, pb = a.places(), b.places()
    changed = [k for k in pa if k in pb
               and normalise(_text(con, base_run, pa[k])) != normalise(_text(con, cand_run, pb[k]))]
    return SubgraphDiff(a.key, a.label, a.compile_ids, b.compile_ids, [k for k in pb if k not in pa],
                        [k for k in pa if k not in pb], changed)


def text_diff(con, baseline_run: str, candidate_run: str, baseline_id: str, candidate_id: str, kind: str,
              rank: int | None = None, context: int = 3) -> str:
    """A unified diff of one artifact (a graph or the output code) between two compile ids, both
    normalised; "" when they are alike. Reads just those two payloads."""
    def text_of(run_id: str, cid: str) -> str:
        for c in _compiles(con, run_id, rank):
            if c.compile_id == cid:
                return normalise(_text(con, run_id, c.artifacts.get(kind)))
        return ""
    a, b = text_of(baseline_run, baseline_id), text_of(candidate_run, candidate_id)
    return "".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                        f"baseline {baseline_id} {kind}", f"candidate {candidate_id} {kind}", n=context))


def describe(d: RunDiff) -> str:
    """The diff as text for a terminal: per matched compile id what changed, then the one-sided ids."""
    out = [f"baseline run {d.baseline_run} vs candidate run {d.candidate_run}: {len(d.pairs)} matched compile id(s), "
           f"{len(d.only_baseline)} only in the baseline, {len(d.only_candidate)} only in the candidate"]
    if d.subgraphs or d.subgraphs_only_baseline or d.subgraphs_only_candidate:
        out.append(f"subgraphs matched by name: {len(d.subgraphs)}, {len(d.subgraphs_only_baseline)} only in the "
                   f"baseline, {len(d.subgraphs_only_candidate)} only in the candidate")
    for sd in d.subgraphs:
        out.append(f"\n[subgraph {sd.label}]: " + ("changed" if sd.changed else "the same artifacts"))
        out += [f"  + artifact {k}" for k in sd.artifacts_added] + [f"  - artifact {k}" for k in sd.artifacts_removed]
        out += [f"  differs: {k}" for k in sd.artifacts_changed]
    for side, items in (("only in the baseline", d.subgraphs_only_baseline),
                        ("only in the candidate", d.subgraphs_only_candidate)):
        out += [f"\n[subgraph {s.label}] {side}: {len(s.artifacts)} artifact(s)" for s in items]
    for p in d.pairs:
        fn, file, line = p.frame
        ids = p.baseline_id if p.baseline_id == p.candidate_id else f"{p.baseline_id} -> {p.candidate_id}"
        out.append(f"\n[{ids}] {fn} ({file}:{line}){' recompile ' + str(p.nth) if p.nth else ''}: "
                   + ("changed" if p.changed else "the same graphs, guards and kernels"))
        for label, added, removed in (("ops", p.ops_added, p.ops_removed), ("kernels", p.kernels_added, p.kernels_removed)):
            for name, n in added.items():
                out.append(f"  + {label[:-1]} {name}" + (f" x{n}" if n > 1 else ""))
            for name, n in removed.items():
                out.append(f"  - {label[:-1]} {name}" + (f" x{n}" if n > 1 else ""))
        out += [f"  + guard {g}" for g in p.guards_added] + [f"  - guard {g}" for g in p.guards_removed]
        if p.kernel_count[0] != p.kernel_count[1]:
            out.append(f"  kernels: {p.kernel_count[0]} -> {p.kernel_count[1]}")
        if p.graphs_changed:
            out.append(f"  differs: {', '.join(p.graphs_changed)} (compilewatch diff ... --show KIND for the text)")
        t = p.phases.get("total", (None, None))
        if t[0] is not None and t[1] is not None:
            out.append(f"  compile time: {t[0]:.2f} s -> {t[1]:.2f} s")
    for side, items in (("only in the baseline", d.only_baseline), ("only in the candidate", d.only_candidate)):
        for c in items:
            out.append(f"\n[{c.compile_id}] {side}: {c.frame[0]} ({c.frame[1]}:{c.frame[2]})"
                       + (f", compile time {c.phases['total']:.2f} s" if c.phases.get("total") is not None else ""))
    return "\n".join(out)
