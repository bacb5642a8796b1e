"""``vllm_piecewise_compile_start`` artifact: vLLM compiles one piece of its split graph for one
compile range (ingest/formats/subgraphs.py). One ``piecewise_compiles`` row each; the records after
it, up to the next, are that piece's (their artifact rows carry its line as ``piece_line``)."""
from __future__ import annotations

from compilewatch.ingest.formats.subgraphs import compile_range, piece_name
from compilewatch.ingest.trace.parsers._util import as_int, load_json


def parse(env, ctx) -> None:
    info = load_json(env, ctx)
    if info is None:
        return
    index = as_int(info.get("piecewise_index")) if isinstance(info, dict) else None
    if index is None:
        ctx.error(env.line_no, "payload", "vllm_piecewise_compile_start payload has no piecewise_index",
                  (env.payload or "")[:200])
        return
    start, end = as_int(info.get("compile_range_start")), as_int(info.get("compile_range_end"))
    single = info.get("is_single_size")
    single = bool(single) if isinstance(single, bool) else (start is not None and start == end)
    cudagraph = info.get("is_cudagraph_capture_size")
    ctx.piece_line = env.line_no
    ctx.sink.row("piecewise_compiles", {
        "line_no": env.line_no, "rank": env.rank, "vllm_model": ctx.vllm_model, "piecewise_index": index,
        "submod_name": piece_name(info.get("submod_name"), index),
        "total_pieces": as_int(info.get("total_piecewise_compiles")),
        "range_start": start, "range_end": end, "is_single_size": single,
        "is_cudagraph_size": cudagraph if isinstance(cudagraph, bool) else None,
        "compile_range": compile_range(start, end, single),
    })
