"""``fx_graph_cache_{hit,miss,bypass}`` (inductor compile_fx) and ``aotautograd_cache_{hit,miss,bypass}``
(functorch autograd_cache) artifacts: one ``cache_events`` row each, with the cache key, and its
key's components as ``cache_key_components`` rows (ingest/formats/cache_key.py says what the payload
holds in each torch version and which part of the key a component is). A bypass carries
``cache_bypass_reason`` and no key.

Most components are settings every lookup of a run repeats: the file's first lookup of a cache (and
rank) keeps them all, each later one only those that differ from the lookup before it, a row with no
hash for one that had it and this one has not, and names that lookup in ``components_base``. A long text (an
input's metadata, a graph) is written once per file: a later component of the same hash has none
(store/migrations/024_cache_key_components.sql)."""
from __future__ import annotations

from compilewatch.ingest.formats import cache_key
from compilewatch.ingest.trace.parsers._util import load_json

ARTIFACTS = {
    "fx_graph_cache_hit": ("fx_graph", "hit"),
    "fx_graph_cache_miss": ("fx_graph", "miss"),
    "fx_graph_cache_bypass": ("fx_graph", "bypass"),
    "fx_graph_bundled_cache_hit": ("fx_graph_bundled", "hit"),
    "aotautograd_cache_hit": ("aotautograd", "hit"),
    "aotautograd_cache_miss": ("aotautograd", "miss"),
    "aotautograd_cache_bypass": ("aotautograd", "bypass"),
}


def _components(env, ctx, lines: list) -> dict[str, tuple[str, str]]:
    """name -> (hash, text) of the payload's component lines; a line of another shape is an error."""
    out, bad = {}, 0
    for line in lines:
        got = cache_key.split(line) if isinstance(line, str) else None
        if got is None:
            bad += 1
        else:
            out[got[1]] = (got[0], got[2])
    if bad:
        ctx.error(env.line_no, "payload", f"{env.artifact_name}: {bad} key component(s) not of the shape "
                  "'[hash] name: text'", str(lines[0])[:200])
    return out


def parse(env, ctx) -> None:
    cache, outcome = ARTIFACTS[env.artifact_name]
    info = load_json(env, ctx) if env.payload_bytes else None
    reason = key = None
    lines: list = []
    compile_id = env.compile_id
    if isinstance(info, dict):
        r = info.get("cache_bypass_reason")
        reason = r if isinstance(r, str) else None
        key = info["key"] if isinstance(info.get("key"), str) else None
        if compile_id is None and isinstance(info.get("compile_id"), str):
            compile_id = info["compile_id"]
        if isinstance(info.get("components"), list):
            lines = info["components"]
    comps = _components(env, ctx, lines) if lines else {}
    bases = ctx.cache_key_bases
    base = bases.get((env.rank, cache)) if comps else None
    if comps:
        bases[(env.rank, cache)] = (env.line_no, {n: h for n, (h, _) in comps.items()})
    ctx.sink.row("cache_events", {"line_no": env.line_no, "compile_id": compile_id, "rank": env.rank,
                                  "cache": cache, "outcome": outcome, "reason": reason, "cache_key": key,
                                  "components": len(comps) if lines else None,
                                  "components_base": base[0] if base else None})
    common = {"line_no": env.line_no, "compile_id": compile_id, "rank": env.rank, "cache": cache}
    written = ctx.cache_key_texts
    for name, (h, text) in comps.items():
        if base is not None and base[1].get(name) == h:
            continue
        cut = len(text) > cache_key.MAX_TEXT
        if len(text) > cache_key.SHORT_TEXT and h in written:
            text, cut = None, False    # written with this hash before in this file: the reader looks it up
        elif len(text) > cache_key.SHORT_TEXT:
            written.add(h)
        ctx.sink.row("cache_key_components", {**common, "part": cache_key.part_of(name), "name": name, "hash": h,
                                              "text": text[:cache_key.MAX_TEXT] if cut else text, "cut": cut})
    for name in (base[1].keys() - comps.keys()) if base is not None else ():
        ctx.sink.row("cache_key_components", {**common, "part": cache_key.part_of(name), "name": name, "hash": None,
                                              "text": None, "cut": False})
