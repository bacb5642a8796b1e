"""``fx_graph_cache_{hit,miss,bypass}`` (inductor compile_fx) and ``aotautograd_cache_{hit,miss,bypass}``
(functorch autograd_cache) artifacts: one ``cache_events`` row each. The JSON payload carries the
cache key, components and, for a bypass, ``cache_bypass_reason``."""
from __future__ import annotations

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
    reason = None
    compile_id = env.compile_id
    if isinstance(info, dict):
        r = info.get("cache_bypass_reason")
        reason = r if isinstance(r, str) else None
        if compile_id is None and isinstance(info.get("compile_id"), str):
            compile_id = info["compile_id"]
    ctx.sink.row("cache_events", {"line_no": env.line_no, "compile_id": compile_id, "rank": env.rank,
                                  "cache": cache, "outcome": outcome, "reason": reason})
