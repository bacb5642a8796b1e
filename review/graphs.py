"""Whether two sides of a comparison compiled the same graphs, frame by frame, and what changed in a
frame, in words.

``frame_fingerprints`` reads the rollup the ingest keeps per run and frame (store/rollups.py:
rollup_frame_fingerprints: the Dynamo graph, the AOT forward and backward graphs, Inductor's output
code and the guards of each frame's compiles, normalised as `compilewatch diff` normalises them);
``compare_graphs`` decides from those rows alone; ``describe_change`` reads one frame's artifacts
of one pair of runs through the diff (deepdive/diff.py), for the frame a verdict names.

Runs of one side may disagree among themselves, and a run may not have logged every part: a compile
loaded from the FX graph or AOTAutograd cache logs fewer artifacts on some torch versions. So a part
is compared on the runs that logged it, and a part no run of a side logged is not compared: a warm
run and a cold run of the same code compile the same graphs.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import pandas as pd

from compilewatch.deepdive.diff import diff_runs, match
from compilewatch.ingest.formats.artifact_text import guard_source, tensor_guard
from compilewatch.review.series import df
from compilewatch.store.run_filter import runs_among, runs_param

PARTS = ("dynamo", "aot_fwd", "aot_bwd", "code", "guards")
# what a reader calls each part of a FrameChange
PART_WORDS = {"dynamo": "Dynamo graph", "aot_fwd": "AOT forward graph", "aot_bwd": "AOT backward graph",
              "code": "Inductor output code", "guards": "guards", "frame": "compiled on one side only"}
Frame = tuple  # (function, file base name, first line)


def frame_fingerprints(con, run_ids) -> pd.DataFrame:
    """One row per run, rank and frame of ``run_ids``: run_id, rank, co_name, co_file,
    co_firstlineno, compiles, dynamo_fp, aot_fwd_fp, aot_bwd_fp, code_fp, guards_fp, fp, and the
    frame's compile time in the run (compile_s, from rollup_compile_time; 0 when none was logged)."""
    run_ids = list(run_ids)
    if not run_ids:
        return pd.DataFrame(columns=["run_id", "rank", "co_name", "co_file", "co_firstlineno", "compiles",
                                     *(f"{p}_fp" for p in PARTS), "fp", "compile_s"])
    # a review reads thousands of runs here at once (GroupFacts.prefetch): runs_among, not runs_match
    flt, t_flt = runs_among(run_ids, "f.run_id"), runs_among(run_ids, "t.run_id")
    # the compile times filtered to the runs before the join: a join with the whole table built its
    # hash table over every run's frames, ~0.9 s a call at 100,000 runs, dozens of calls a review
    return df(con, f"""
        SELECT f.*, coalesce(t.total_s, 0) AS compile_s
        FROM rollup_frame_fingerprints f
        LEFT JOIN (SELECT * FROM rollup_compile_time t WHERE {t_flt}) t
             ON t.run_id = f.run_id AND t.co_name IS NOT DISTINCT FROM f.co_name
             AND t.co_file IS NOT DISTINCT FROM f.co_file AND t.co_firstlineno IS NOT DISTINCT FROM f.co_firstlineno
        WHERE {flt} ORDER BY f.run_id, f.rank NULLS FIRST, f.co_name, f.co_file, f.co_firstlineno""",
              [runs_param(run_ids)])


@dataclass(frozen=True)
class FrameChange:
    frame: Frame                       # (function, file base name, first line)
    parts: tuple[str, ...]             # of PARTS, or ("frame",) when it compiled on one side only
    compiles: tuple[int, int]          # the frame's compile ids in a run of each side (the most; 0: none)
    compile_s: float                   # its compile time, the mean of the runs that compiled it


@dataclass
class GraphComparison:
    same: bool | None                  # None: a side has no run with fingerprints to compare
    changed: list[FrameChange]         # busiest first (compile time, then compiles)
    frames: int = 0                    # frames compared (a pair of frames counts once)
    unknown_runs: list[str] = field(default_factory=list)   # runs without fingerprints (stored before them)

    @property
    def changed_parts(self) -> set[str]:
        return {p for c in self.changed for p in c.parts}


def _key(row) -> Frame:
    return (row["co_name"], row["co_file"], None if pd.isna(row["co_firstlineno"]) else int(row["co_firstlineno"]))


def _sides(rows: pd.DataFrame, run_ids: set[str]) -> dict[Frame, dict]:
    """Per frame of one side's runs: the fingerprints its runs logged per part, its most compiles in
    a run, and its compile time per run."""
    out: dict[Frame, dict] = {}
    for row in rows[rows["run_id"].isin(run_ids)].to_dict("records"):
        f = out.setdefault(_key(row), {"values": {p: set() for p in PARTS}, "compiles": 0, "time": {}})
        f["compiles"] = max(f["compiles"], int(row["compiles"] or 0))
        f["time"][row["run_id"]] = float(row["compile_s"] or 0)
        for p in PARTS:
            v = row[f"{p}_fp"]
            if v is not None and not pd.isna(v):
                f["values"][p].add(v)
    return out


def compare_graphs(frames: pd.DataFrame, base_ids, cand_ids) -> GraphComparison:
    """Whether the runs ``cand_ids`` compiled what the runs ``base_ids`` compiled, from the rows of
    ``frame_fingerprints``. Frames are paired as `compilewatch diff` pairs them (the same frame, else
    the same function in the same file: an edit above it moved its first line, else the same
    function). A pair is the same when, part by part, the fingerprints the runs of one side logged
    are those the other side's runs logged; a frame compiled on one side only is a change. Runs with
    no fingerprint at all (stored before fingerprints, or with no trace) are left out and listed;
    ``same`` is None when that leaves a side with none. A changed frame is named as the candidate
    has it (the baseline's when only the baseline compiled it)."""
    base_ids, cand_ids = set(base_ids), set(cand_ids)
    rows = frames[frames["run_id"].isin(base_ids | cand_ids)]
    part_cols = [f"{p}_fp" for p in PARTS]
    known = set(rows.loc[rows[part_cols].notna().any(axis=1), "run_id"])
    unknown = sorted((base_ids | cand_ids) - known)
    if not (known & base_ids) or not (known & cand_ids):
        return GraphComparison(None, [], 0, unknown)
    base, cand = _sides(rows, base_ids & known), _sides(rows, cand_ids & known)
    a_list = [SimpleNamespace(frame=k) for k in sorted(base, key=str)]
    b_list = [SimpleNamespace(frame=k) for k in sorted(cand, key=str)]
    pairs = match(a_list, b_list)
    paired = {id(x) for pair in pairs for x in pair}
    changed = []

    def add(frame: Frame, parts: tuple[str, ...], sides: list[dict | None]) -> None:
        times = [t for f in sides if f for t in f["time"].values()]
        changed.append(FrameChange(frame, parts, tuple(f["compiles"] if f else 0 for f in sides),
                                   sum(times) / len(times) if times else 0.0))

    for a, b in pairs:
        fa, fb = base[a.frame], cand[b.frame]
        parts = tuple(p for p in PARTS if fa["values"][p] and fb["values"][p] and fa["values"][p] != fb["values"][p])
        if parts:
            add(b.frame, parts, [fa, fb])
    for x in a_list:
        if id(x) not in paired:
            add(x.frame, ("frame",), [base[x.frame], None])
    for x in b_list:
        if id(x) not in paired:
            add(x.frame, ("frame",), [None, cand[x.frame]])
    changed.sort(key=lambda c: (-c.compile_s, -sum(c.compiles), str(c.frame)))
    return GraphComparison(not changed, changed, len(a_list) + len(b_list) - len(pairs), unknown)


def _ranks(frames: pd.DataFrame) -> list[int]:
    return sorted({int(r) for r in frames["rank"].dropna().unique()}) if "rank" in frames.columns else []


def changed_ranks(frames: pd.DataFrame, base_ids, cand_ids, frame: Frame) -> list[int]:
    """In multi-rank runs, the ranks whose own graphs of ``frame`` differ between the sides (each rank
    compared with the same rank of the other side, as `compilewatch diff --rank` compares them);
    [] where the runs have one rank. A change one rank alone carries is named by it."""
    ranks = _ranks(frames)
    if len(ranks) < 2:
        return []
    out = []
    for r in ranks:
        cmp = compare_graphs(frames[frames["rank"] == r], base_ids, cand_ids)
        if cmp.same is False and any(c.frame == tuple(frame) for c in cmp.changed):
            out.append(r)
    return out


def ranks_words(ranks: list[int], frames: pd.DataFrame) -> str:
    """" on rank 1", " on ranks 1, 3", " on all 2 ranks"; "" for a one-rank job."""
    if not ranks:
        return ""
    every = _ranks(frames)
    if ranks == every:
        return f" on all {len(every)} ranks"
    return f" on rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))}"


# --- what changed, in words ------------------------------------------------------------------------

@dataclass(frozen=True)
class GuardChange:
    source: str                        # what the guards read: L['x'], L['self'].blocks[0].up
    before: tuple[str, ...]            # that source's guards only in the baseline
    after: tuple[str, ...]             # ... only in the candidate
    device: tuple[str, str] | None     # a tensor's device, baseline -> candidate, when it moved
    dtype: tuple[str, str] | None      # a tensor's dtype, when it changed
    kind: tuple[str, str] | None       # "tensor" -> "float" (a Python value): what the source is

    def words(self) -> str:
        name = _source_words(self.source)
        if self.kind:
            return f"guard on {name}: {self.kind[0]} → {self.kind[1]}"
        if self.device:
            return f"guard on {name} moved {self.device[0]} → {self.device[1]}" + (
                f", {self.dtype[0]} → {self.dtype[1]}" if self.dtype else "")
        if self.dtype:
            return f"guard on {name}: {self.dtype[0]} → {self.dtype[1]}"
        if self.before and self.after:
            return f"guard on {name} changed"
        return f"guard on {name} {'added' if self.after else 'removed'}"


@dataclass
class ChangeSummary:
    frame: Frame
    baseline_run: str
    candidate_run: str
    compiles: tuple[int, int]                  # the frame's compile ids in each run
    ops_added: dict[str, int]                  # Dynamo graph calls, short names (tag_activation_checkpoint)
    ops_removed: dict[str, int]
    kernels_added: dict[str, int]              # Inductor kernels, numbers made alike (cpp_fused_add_N)
    kernels_removed: dict[str, int]
    kernel_count: tuple[int, int]
    guards_added: list[str]
    guards_removed: list[str]
    guard_changes: list[GuardChange]           # per source: changed, moved to a device or dtype, added, removed
    graphs_changed: list[str]                  # artifact kinds whose normalised text differs
    sentence: str

    @property
    def cpp_kernels_added(self) -> list[str]:
        return [k for k in self.kernels_added if kernel_backend(k) == "C++"]

    @property
    def triton_kernels_added(self) -> list[str]:
        return [k for k in self.kernels_added if kernel_backend(k) == "Triton"]


def kernel_backend(name: str) -> str:
    """Which code generator wrote a kernel, from its name: C++ (CPU) or Triton (GPU)."""
    return "C++" if name.startswith("cpp_") else "Triton" if name.startswith("triton_") else "other"


def _short_op(name: str) -> str:
    # torch.ops.higher_order.tag_activation_checkpoint -> tag_activation_checkpoint; .relu -> relu
    return name.rsplit(".", 1)[-1] or name


_SUBSCRIPT = re.compile(r"\[['\"]?([^'\"\]]*)['\"]?\]")
_MODULE_DICTS = re.compile(r"\._(?:modules|parameters|buffers)(?=\[)")


def _source_words(source: str) -> str:
    # L['x'] -> x; L['self']._modules['blocks']._modules['0']._parameters['bias'] -> self.blocks.0.bias
    s = _MODULE_DICTS.sub("", source[1:] if source[:1] in "LG" else source)
    return _SUBSCRIPT.sub(lambda m: ("." if m.start() else "") + m.group(1), s).lstrip(".")


_LITERAL = re.compile(r"^EQUALS_MATCH: .*? == (?P<v>.+)$")


def _what(guards: list[str]) -> str | None:
    """What a source is from its guards: a tensor, or a Python value's type from its EQUALS_MATCH."""
    if any(tensor_guard(g) for g in guards):
        return "tensor"
    for g in guards:
        m = _LITERAL.match(g)
        if m:
            v = m.group("v").strip()
            if re.fullmatch(r"-?\d+", v):
                return "int"
            if re.fullmatch(r"-?[\d.]+(e-?\d+)?|inf|-inf|nan", v):
                return "float"
            if v in ("True", "False"):
                return "bool"
            if v == "None":
                return "None"
            return "value"
    return None


def _guard_changes(added: list[str], removed: list[str]) -> list[GuardChange]:
    by_source: dict[str, tuple[list, list]] = {}
    for side, guards in ((0, removed), (1, added)):
        for g in guards:
            by_source.setdefault(guard_source(g) or g, ([], []))[side].append(g)
    out = []
    for source, (before, after) in by_source.items():
        tb = next((t for t in map(tensor_guard, before) if t), None)
        ta = next((t for t in map(tensor_guard, after) if t), None)
        device = dtype = kind = None
        if tb and ta:
            device = (tb[1], ta[1]) if tb[1] != ta[1] else None
            dtype = (tb[2], ta[2]) if tb[2] != ta[2] else None
        elif before and after:
            wb, wa = _what(before), _what(after)
            if wb and wa and wb != wa:
                kind = (f"tensor {tb[1]} {tb[2]}" if tb else wb, f"tensor {ta[1]} {ta[2]}" if ta else wa)
        out.append(GuardChange(source, tuple(sorted(before)), tuple(sorted(after)), device, dtype, kind))
    # moves and kind changes first: they are what a reader acts on
    return sorted(out, key=lambda c: (not (c.device or c.dtype or c.kind), not (c.before and c.after), c.source))


def describe_change(con, base_run: str, cand_run: str, frame: Frame, rank: int | None = None) -> ChangeSummary:
    """What changed in ``frame`` (function, file base name, first line) between two runs, from the
    diff of that frame's compiles alone (deepdive/diff.py: ops, guards, kernels), with a short
    sentence: "forward (blocks_job.py:44): +2 tag_activation_checkpoint; kernels 9 → 14"."""
    frame = tuple(frame)
    d = diff_runs(con, base_run, cand_run, rank, frame=frame)
    ops_a, ops_r, k_a, k_r = Counter(), Counter(), Counter(), Counter()
    g_a, g_r, kinds = [], [], []
    kernel_count = [0, 0]
    for p in d.pairs:
        ops_a.update({_short_op(k): n for k, n in p.ops_added.items()})
        ops_r.update({_short_op(k): n for k, n in p.ops_removed.items()})
        k_a.update(p.kernels_added)
        k_r.update(p.kernels_removed)
        g_a += p.guards_added
        g_r += p.guards_removed
        kinds += [k for k in p.graphs_changed if k not in kinds]
        kernel_count[0] += p.kernel_count[0]
        kernel_count[1] += p.kernel_count[1]
    compiles = (len(d.pairs) + len(d.only_baseline), len(d.pairs) + len(d.only_candidate))
    changes = _guard_changes(sorted(set(g_a)), sorted(set(g_r)))
    s = ChangeSummary(frame, base_run, cand_run, compiles, dict(ops_a), dict(ops_r), dict(k_a), dict(k_r),
                      tuple(kernel_count), sorted(set(g_a)), sorted(set(g_r)), changes, kinds, "")
    s.sentence = _sentence(s)
    return s


def change_fields(s: ChangeSummary | None, rank: int | None = None) -> dict:
    """A change's diff as a cause part's fields (--json): the two runs and the rank it was read from,
    so that `compilewatch diff BASELINE CANDIDATE [--rank N]` shows the same, the ops and kernels
    added and removed, and per guarded source what changed. Empty where the runs could not be diffed."""
    if s is None:
        return {}
    return {"baseline_run": s.baseline_run, "candidate_run": s.candidate_run, "diff_rank": rank,
            "compiles": list(s.compiles),
            "ops_added": s.ops_added, "ops_removed": s.ops_removed, "kernels_added": s.kernels_added,
            "kernels_removed": s.kernels_removed, "cpp_kernels_added": s.cpp_kernels_added,
            "kernel_count": list(s.kernel_count),
            "guard_changes": [{"source": c.source, "device": list(c.device) if c.device else None,
                               "dtype": list(c.dtype) if c.dtype else None, "kind": list(c.kind) if c.kind else None,
                               "added": len(c.after), "removed": len(c.before)} for c in s.guard_changes],
            "graphs_changed": list(s.graphs_changed)}


def _counted(sign: str, items: dict[str, int], most: int = 3) -> list[str]:
    top = sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))
    out = [f"{sign}{n} {name}" if n > 1 else f"{sign}{name}" for name, n in top[:most]]
    if len(top) > most:
        out.append(f"{sign}{len(top) - most} more")
    return out


def _sentence(s: ChangeSummary) -> str:
    fn, file, line = s.frame
    where = f"{fn} ({file}:{line})" if file else str(fn)
    if s.compiles[0] == 0 or s.compiles[1] == 0:
        return f"{where} compiled only in the {'candidate' if s.compiles[0] == 0 else 'baseline'}"
    bits = []
    ops = _counted("+", s.ops_added) + _counted("-", s.ops_removed)
    if ops:
        bits.append(", ".join(ops))
    bits += [c.words() for c in s.guard_changes if c.kind]
    moves: dict[tuple, list[str]] = {}     # one clause per move: 15 parameters float32 -> float64 read as one
    for c in s.guard_changes:
        if not c.kind and (c.device or c.dtype):
            moves.setdefault((c.device, c.dtype), []).append(_source_words(c.source))
    for (device, dtype), names in moves.items():
        names.sort(key=lambda n: (n.startswith("self."), n))   # the inputs first, then module state
        who = ", ".join(names[:2]) + (f" (+{len(names) - 2} more)" if len(names) > 2 else "")
        how = ", ".join(f"{m[0]} → {m[1]}" for m in (device, dtype) if m)
        bits.append(f"guard{'s' * (len(names) > 1)} on {who}" + (f" moved {how}" if device else f": {how}"))
    plain = [c for c in s.guard_changes if not (c.device or c.dtype or c.kind)]
    changed = [c for c in plain if c.before and c.after]
    bits += [c.words() for c in changed[:2]] + ([f"{len(changed) - 2} more guards changed"] if len(changed) > 2 else [])
    added = sum(len(c.after) for c in plain if not c.before)
    removed = sum(len(c.before) for c in plain if not c.after)
    counts = [f"{sign}{n} guard{'s' * (n != 1)}" for sign, n in (("+", added), ("-", removed)) if n]
    if counts:
        bits.append(", ".join(counts))
    if s.kernel_count[0] != s.kernel_count[1]:
        bits.append(f"kernels {s.kernel_count[0]} → {s.kernel_count[1]}")
    for backend in ("C++", "Triton"):
        new = [k for k in s.kernels_added if kernel_backend(k) == backend]
        if new:
            bits.append(f"new {backend} kernel{'s' * (len(new) > 1)} {', '.join(new[:2])}"
                        + (f" (+{len(new) - 2} more)" if len(new) > 2 else ""))
    if not bits and s.graphs_changed:
        bits.append(f"{', '.join(s.graphs_changed)} differ")
    return f"{where}: {'; '.join(bits)}" if bits else f"{where}: no change"
