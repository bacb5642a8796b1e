"""Why a run's compile cache missed where another run's hit: for each pair of matched compiles
(store/compile_match.py: frame and compile order, as `compilewatch diff` pairs them), each FX graph
or AOTAutograd cache lookup the candidate missed or bypassed where the baseline hit, or missed under
another key than the baseline's miss, and which parts of the cache key differed: the graph, a
setting, the torch build, the input metadata, a process-group name (ingest/formats/cache_key.py),
with the components' text before and after, shortened.

A component differs when its own hash differs (the text may hold addresses that do not). Where torch
logged no components for a lookup (AOTAutograd from 2.12 on, unless its logger is at DEBUG), the
parts are those the FX graph keys of the same compile differed in, said as such.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from compilewatch.ingest.formats import cache_key as ck
from compilewatch.store.compile_match import compile_frames, match, pick_rank
from compilewatch.store.run_keys import HARDWARE, RUN_TIME
from compilewatch.store.run_rows import remembered, run_filter

CACHE_LABELS = {"fx_graph": "the FX graph cache", "aotautograd": "the AOTAutograd cache",
                "fx_graph_bundled": "the bundled FX graph cache"}
# a setting's own name for the sentence: "the inductor config differed (size_asserts True → False)"
_ATTR_LABELS = {"inductor_config": "the inductor config", "inductor_config_comms": "the inductor comms config",
                "autograd_config": "the functorch config", "fx_kwargs": "the compile arguments"}
SHORT = 80


@dataclass
class ComponentChange:
    part: str                 # ingest.formats.cache_key.PARTS
    name: str                 # inductor_config[size_asserts], example_inputs[0], gm, ...
    before: str | None        # shortened; None: the baseline's key has no such component
    after: str | None         # shortened; None: the candidate's key has no such component

    def to_json(self) -> dict:
        return {"part": self.part, "name": self.name, "before": self.before, "after": self.after}


@dataclass
class CacheMiss:
    frame: tuple[str, str, int | None]     # function, file name, first line
    nth: int                               # the frame's compile: 0 first, 1 first recompile, ...
    baseline_compile_id: str
    candidate_compile_id: str
    cache: str                             # fx_graph | aotautograd | fx_graph_bundled
    graph: str | None                      # forward | backward | inference (FX graph lookups), else None
    baseline_outcome: str | None           # hit | miss | bypass; None: no such lookup in the baseline
    candidate_outcome: str                 # miss | bypass
    baseline_key: str | None
    candidate_key: str | None
    parts: list[str]                       # the key's parts that differed, in PARTS order
    changes: list[ComponentChange] = field(default_factory=list)
    bypass_reason: str | None = None
    components_logged: bool = True         # False: the parts come from the same compile's FX graph keys

    @property
    def where(self) -> str:
        ids = (self.candidate_compile_id if self.baseline_compile_id == self.candidate_compile_id
               else f"{self.baseline_compile_id} -> {self.candidate_compile_id}")
        return f"{self.graph + ' of ' if self.graph else ''}{self.frame[0]} ({ids})"

    def sentence(self) -> str:
        """One sentence: which cache, where, and why."""
        head = f"{CACHE_LABELS.get(self.cache, self.cache)} " + \
               ("was bypassed" if self.candidate_outcome == "bypass" else "missed") + f" on {self.where}"
        if self.candidate_outcome == "bypass":
            return f"{head}: {self.bypass_reason or 'torch gave no reason'}"
        if self.parts:
            said = _parts_said(self.changes, self.parts)
            if not self.components_logged:
                return f"{head}: its key differed, torch logged none of its components; in the same compile's " \
                       f"FX graph keys {said}"
            return f"{head}: {said}"
        if self.baseline_key and self.baseline_key == self.candidate_key:
            return f"{head}: the key was the same, the entry was not in the cache (another or a cleared cache folder)"
        if self.baseline_key is None and self.baseline_outcome is None:
            return f"{head}: the baseline made no such lookup"
        return f"{head}: the key differed, and torch logged none of its components"

    def to_json(self) -> dict:
        return {"function": self.frame[0], "file": self.frame[1], "line": self.frame[2], "nth": self.nth,
                "baseline_compile_id": self.baseline_compile_id, "candidate_compile_id": self.candidate_compile_id,
                "cache": self.cache, "graph": self.graph, "baseline_outcome": self.baseline_outcome,
                "candidate_outcome": self.candidate_outcome, "baseline_key": self.baseline_key,
                "candidate_key": self.candidate_key, "parts": self.parts,
                "changes": [c.to_json() for c in self.changes], "bypass_reason": self.bypass_reason,
                "components_logged": self.components_logged, "sentence": self.sentence()}


def _parts_said(changes: list[ComponentChange], parts: list[str]) -> str:
    """"the inductor config differed (size_asserts: True → False)", one clause a part, the first
    component of each."""
    said = []
    for part in parts:
        c = next((c for c in changes if c.part == part), None)
        if c is None:
            said.append(f"{ck.PART_LABELS[part]} differed")
            continue
        attr = ck.attr(c.name)
        label = _ATTR_LABELS.get(attr)
        name = c.name[len(attr) + 1:-1] if label and c.name != attr else c.name
        label = label or ck.PART_LABELS[part]
        if part == ck.PROCESS_GROUP:
            said.append(f"{label} differed ({c.before} → {c.after}, in the graph's collectives)")
        elif c.before is not None and c.after is not None:
            said.append(f"{label} differed ({name}: {c.before} → {c.after})")
        else:
            said.append(f"{label} differed ({name} {'added' if c.before is None else 'gone'})")
    if len(said) > 2:
        return ", ".join(said[:2]) + f", and {len(said) - 2} more part(s)"
    return ", and ".join(said)


@dataclass
class _Event:
    line: tuple[int, int]
    compile_id: str
    cache: str
    outcome: str
    key: str | None
    reason: str | None
    components: dict[str, tuple[str, str, str, bool]]   # name -> (hash, text, part, cut)

    @property
    def graph(self) -> str | None:
        return ck.graph_role({n: c[1] for n, c in self.components.items()}) if self.cache != "aotautograd" else None


_ALL_RANKS = object()


def _lookups(con, run_id: str, rank=_ALL_RANKS) -> list[_Event]:
    """The run's cache lookups (of one rank, or all) in log order, each with its key's components: a
    lookup's own rows over the components of the lookup it names in components_base, the one before
    it of the same file, rank and cache (a row with no hash: absent from this key)."""
    flt = run_filter(con, run_id)
    one = "" if rank is _ALL_RANKS else " AND rank IS NOT DISTINCT FROM ?"
    params = [run_id] if rank is _ALL_RANKS else [run_id, rank]
    cur = con.cursor()
    try:
        evs = cur.execute(f"""SELECT file_id, line_no, rank, compile_id, cache, outcome, cache_key, reason, components_base
                              FROM cache_events WHERE {flt}{one} ORDER BY file_id, line_no""", params).fetchall()
        comps = cur.execute(f"""SELECT file_id, line_no, name, hash, text, part, cut FROM cache_key_components
                                WHERE {flt}{one}""", params).fetchall()
    finally:
        cur.close()
    texts = {h: (text, bool(cut)) for _, _, _, h, text, _, cut in comps if text is not None}
    own: dict[tuple[int, int], dict] = {}
    for fid, line, name, h, text, part, cut in comps:
        if text is None:   # a long text written once per file under its hash (parsers/cache_events.py)
            text, cut = texts.get(h, ("", False))
        own.setdefault((fid, line), {})[name] = (h, text, part, bool(cut))
    latest: dict[tuple, dict] = {}    # (file, rank, cache) -> the components of its latest lookup
    out = []
    for fid, line, rnk, cid, cache, outcome, key, reason, base in evs:
        mine = own.get((fid, line))
        if base is not None or mine:
            components = {**latest.get((fid, rnk, cache), {}), **(mine or {})} if base is not None else dict(mine)
            components = {n: c for n, c in components.items() if c[0] is not None}
            latest[(fid, rnk, cache)] = components
        else:
            components = {}
        out.append(_Event((fid, line), cid, cache, outcome, key, reason, components))
    return out


def _events(con, run_id: str, rank: int | None) -> dict[str, list[_Event]]:
    """The run's cache lookups of one rank per compile id, in log order."""
    out: dict[str, list[_Event]] = {}
    for e in _lookups(con, run_id, rank):
        if e.compile_id is not None:
            out.setdefault(e.compile_id, []).append(e)
    return out


def lookup_graphs(con, run_id: str) -> dict[tuple[int, int], str | None]:
    """(file_id, line_no) of each of the run's cache lookups -> the graph it looked up: forward,
    backward or inference for an FX graph lookup whose key torch logged, else None."""
    return {e.line: e.graph for e in _lookups(con, run_id)}


def _pair_events(a: list[_Event], b: list[_Event]) -> list[tuple[_Event | None, _Event]]:
    """Each candidate lookup with the baseline's of the same cache and graph, in order; then with a
    leftover of the same cache (a bypass logs no components, so no graph)."""
    left = list(a)
    pairs, unpaired = [], []
    for e in b:
        same = next((x for x in left if x.cache == e.cache and x.graph == e.graph), None)
        if same is not None:
            left.remove(same)
            pairs.append((same, e))
        else:
            unpaired.append(e)
    for e in unpaired:
        same = next((x for x in left if x.cache == e.cache), None)
        if same is not None:
            left.remove(same)
        pairs.append((same, e))
    return sorted(pairs, key=lambda p: p[1].line)


def _fields(text: str) -> list[str] | None:
    """The top-level `k=v` items of `Name(k=v, ...)`, or None for text of another shape."""
    m = re.fullmatch(r"\w+\((.*)\)", text.strip(), re.S)
    if not m:
        return None
    items, depth, cur = [], 0, ""
    for ch in m.group(1):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    items.append(cur.strip())
    return items


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHORT else text[:SHORT - 1] + "…"


def shorten(before: str | None, after: str | None) -> tuple[str | None, str | None]:
    """Two texts of one component shortened to what differs: the differing fields of a
    `TensorMetadata(...)`, the first differing line of a graph, else the text cut to SHORT."""
    if before is None or after is None:
        return (None if before is None else _cut(before)), (None if after is None else _cut(after))
    fa, fb = _fields(before), _fields(after)
    if fa and fb and len(fa) == len(fb):
        diff = [(x, y) for x, y in zip(fa, fb) if x != y]
        if diff:
            return _cut(", ".join(x for x, _ in diff)), _cut(", ".join(y for _, y in diff))
    la, lb = before.splitlines(), after.splitlines()
    if len(la) > 1 or len(lb) > 1:
        removed = [ln for ln in difflib.ndiff(la, lb) if ln.startswith("- ")]
        added = [ln for ln in difflib.ndiff(la, lb) if ln.startswith("+ ")]
        if removed or added:
            return (_cut(removed[0][2:]) if removed else "(nothing)"), (_cut(added[0][2:]) if added else "(nothing)")
    return _cut(before), _cut(after)


def _changes(a: _Event, b: _Event, versions: tuple[str | None, str | None]) -> list[ComponentChange]:
    out = []
    for name in list(a.components) + [n for n in b.components if n not in a.components]:
        ca, cb = a.components.get(name), b.components.get(name)
        if ca and cb and ca[0] == cb[0]:
            continue
        part = (ca or cb)[2]
        if part == ck.GRAPH and ca and cb:
            part = ck.graph_change_part(ca[1], cb[1], cut=ca[3] or cb[3])
        if name == "torch_version":    # a hash of torch's sources, as bytes: the runs' versions say it
            before, after = versions[0] or "another build", versions[1] or "another build"
            if before == after:
                before, after = f"{before} (other sources)", f"{after} (other sources)"
        elif part == ck.PROCESS_GROUP:
            before, after = ", ".join(ck.group_names(ca[1])), ", ".join(ck.group_names(cb[1]))
        else:
            before, after = shorten(ca[1] if ca else None, cb[1] if cb else None)
        out.append(ComponentChange(part, name, before, after))
    out.sort(key=lambda c: ck.PARTS.index(c.part))
    return out


def _torch_versions(con, baseline_run: str, candidate_run: str) -> tuple[str | None, str | None]:
    cur = con.cursor()
    try:
        got = dict(cur.execute("SELECT run_id, torch_version FROM runs WHERE run_id IN (?, ?)",
                               [baseline_run, candidate_run]).fetchall())
    finally:
        cur.close()
    return got.get(baseline_run), got.get(candidate_run)


def why_missed(con, baseline_run: str, candidate_run: str, rank: int | None = None) -> list[CacheMiss]:
    """Every cache lookup of the candidate that missed or was bypassed where the baseline's lookup of
    the matched compile hit, or that missed under another key than the baseline's miss, with the parts
    of the key that differed. In the candidate's compile order; [] when nothing missed so."""
    versions = _torch_versions(con, baseline_run, candidate_run)
    a_rank, b_rank = pick_rank(con, baseline_run, rank), pick_rank(con, candidate_run, rank)
    ev_a, ev_b = _events(con, baseline_run, a_rank), _events(con, candidate_run, b_rank)
    out: list[CacheMiss] = []
    for ca, cb in match(compile_frames(con, baseline_run, a_rank), compile_frames(con, candidate_run, b_rank)):
        found = []
        for a, b in _pair_events(ev_a.get(ca.compile_id, []), ev_b.get(cb.compile_id, [])):
            # a lookup the baseline did not make is nothing it hit; both missing under one key is two cold caches
            if b.outcome == "hit" or a is None or \
                    (a.outcome != "hit" and not (a.outcome == b.outcome == "miss" and a.key != b.key)):
                continue
            changes = _changes(a, b, versions) if b.outcome == "miss" else []
            parts = list(dict.fromkeys(c.part for c in changes))
            found.append(CacheMiss(cb.frame, cb.nth, ca.compile_id, cb.compile_id, b.cache, b.graph or a.graph,
                                   a.outcome, b.outcome, a.key, b.key, parts, changes, b.reason,
                                   bool(a.components and b.components)))
        # a lookup torch logged no components for: the parts the same compile's FX graph keys differed in
        inferred = list(dict.fromkeys(p for m in found if m.cache != "aotautograd" for p in m.parts))
        for m in found:
            if not m.components_logged and not m.parts and m.candidate_outcome == "miss" \
                    and m.baseline_key != m.candidate_key and inferred:
                m.parts = inferred
                seen = {}
                for c in (c for x in found if x.cache != "aotautograd" for c in x.changes):
                    seen.setdefault((c.name, c.before, c.after), c)
                m.changes = list(seen.values())
        out += found
    return out


def summary(misses: list[CacheMiss]) -> str | None:
    """One sentence for a verdict's cause: the most telling miss (an FX graph lookup with the
    components that differed, else the first), and how many more there were; None for no miss."""
    if not misses:
        return None
    best = next((m for m in misses if m.cache == "fx_graph" and m.parts and m.components_logged), None) \
        or next((m for m in misses if m.parts), misses[0])
    more = len(misses) - 1
    return best.sentence() + (f" ({more} more cache lookup{'s' if more > 1 else ''} missed)" if more else "")


def describe(misses: list[CacheMiss]) -> str:
    """The misses as text for a terminal: a sentence each, then the components that differed."""
    if not misses:
        return "compile caches: no lookup missed where the baseline's hit"
    out = [f"compile caches: {len(misses)} lookup(s) missed where the baseline's hit or missed under another key"]
    for m in misses:
        out.append(f"  {m.sentence()}")
        for c in m.changes[:12]:
            before = "(absent)" if c.before is None else c.before
            after = "(absent)" if c.after is None else c.after
            out.append(f"    {c.part}: {c.name}: {before} -> {after}")
        if len(m.changes) > 12:
            out.append(f"    ... and {len(m.changes) - 12} more component(s)")
    return "\n".join(out)


def run_before(con, run_id: str) -> str | None:
    """The run a run's cache lookups are explained against when no other is named: the newest run of
    the same model on the same hardware that started before it; None when there is none. Asked
    once per page render (run_rows.remembered): the run detail names it and explains against it."""
    return remembered(("run before", run_id), lambda: _run_before(con, run_id))


def _run_before(con, run_id: str) -> str | None:
    cur = con.cursor()
    try:
        got = cur.execute(f"""
            WITH me AS (SELECT r.model, {HARDWARE} AS hardware, {RUN_TIME} AS t FROM runs r WHERE r.run_id = ?)
            SELECT r.run_id FROM runs r, me
            WHERE r.run_id <> ? AND r.model IS NOT DISTINCT FROM me.model AND {HARDWARE} = me.hardware
              AND {RUN_TIME} < me.t
            ORDER BY {RUN_TIME} DESC, r.run_id DESC LIMIT 1""", [run_id, run_id]).fetchall()
    finally:
        cur.close()
    return got[0][0] if got else None


def cause(con, baseline_run: str, candidate_run: str, rank: int | None = None) -> str | None:
    """``summary(why_missed(...))``: the sentence a verdict's cause can carry, None when no lookup missed."""
    return summary(why_missed(con, baseline_run, candidate_run, rank))
