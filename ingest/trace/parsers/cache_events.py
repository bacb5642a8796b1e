"""``fx_graph_cache_{hit,miss,bypass}`` (inductor compile_fx) and ``aotautograd_cache_{hit,miss,bypass}``
(functorch autograd_cache) artifacts: one ``cache_events`` row each, with the cache key, and one
``cache_key_components`` row per component of that key (ingest/formats/cache_key.py says what the
payload holds in each torch version and which part of the key a component is). A bypass carries
``cache_bypass_reason`` and no key."""
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


def parse(env, ctx) -> None:
    cache, outcome = ARTIFACTS[env.artifact_name]
    info = load_json(env, ctx) if env.payload_bytes else None
    reason = key = None
    components = []
    compile_id = env.compile_id
    if isinstance(info, dict):
        r = info.get("cache_bypass_reason")
        reason = r if isinstance(r, str) else None
        key = info["key"] if isinstance(info.get("key"), str) else None
        if compile_id is None and isinstance(info.get("compile_id"), str):
            compile_id = info["compile_id"]
        if isinstance(info.get("components"), list):
            components = info["components"]
    ctx.sink.row("cache_events", {"line_no": env.line_no, "compile_id": compile_id, "rank": env.rank,
                                  "cache": cache, "outcome": outcome, "reason": reason, "cache_key": key})
    bad = 0
    for line in components:
        got = cache_key.split(line) if isinstance(line, str) else None
        if got is None:
            bad += 1
            continue
        h, name, text = got
        cut = len(text) > cache_key.MAX_TEXT
        ctx.sink.row("cache_key_components", {
            "line_no": env.line_no, "compile_id": compile_id, "rank": env.rank, "cache": cache,
            "part": cache_key.part_of(name), "name": name, "hash": h,
            "text": text[:cache_key.MAX_TEXT] if cut else text, "cut": cut})
    if bad:
        ctx.error(env.line_no, "payload", f"{env.artifact_name}: {bad} key component(s) not of the shape "
                  "'[hash] name: text'", str(components[0])[:200])
