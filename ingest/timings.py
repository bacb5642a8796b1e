"""timings.json from the collector's hooks (shape: ingest.bundle.TIMINGS_DOC) -> step_timings rows
(mode 'iteration' is the iteration period) and one timing_summaries row per file (per rank)."""
from __future__ import annotations

import json


def _int(value):
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _float(value):
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _inductor_counters(data: dict) -> dict:
    """dynamo_counters["inductor"]: where torch counts CUDA-graph skips and partitions."""
    counters = data.get("dynamo_counters")
    inductor = counters.get("inductor") if isinstance(counters, dict) else None
    return inductor if isinstance(inductor, dict) else {}


def parse_timings(stream, sink) -> None:
    try:
        data = json.loads(stream.read().decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        sink.error(e.lineno, "json", f"timings.json does not decode: {e.msg}", "")
        return
    if not isinstance(data, dict):
        sink.error(1, "json", "timings.json is not an object", "")
        return
    rank = _int(data.get("rank"))
    iteration = None
    callables = data.get("callables")
    if not isinstance(callables, list):
        if callables is not None:
            sink.error(1, "payload", "callables is not a list", str(callables)[:200])
        callables = []
    for c in callables:
        if not isinstance(c, dict):
            sink.error(1, "payload", "callables entry is not an object", str(c)[:200])
            continue
        if c.get("mode") == "iteration":
            iteration = c
        steps = c.get("steps")
        for s in steps if isinstance(steps, list) else []:
            try:
                sink.row("step_timings", {
                    "callable": c.get("name"),
                    "mode": c.get("mode"),
                    "step": int(s["step"]),
                    "phase": s.get("phase"),
                    "duration_ms": float(s["duration_ms"]),
                    "peak_mem_bytes": s.get("peak_mem_bytes"),
                    "rank": rank,
                })
            except (KeyError, TypeError, ValueError, OverflowError) as e:
                sink.error(1, "payload", f"step entry of {c.get('name')!r} lacks {e}", str(s)[:200])
    env = data.get("env") if isinstance(data.get("env"), dict) else {}
    counters = _inductor_counters(data)
    cudagraphs = data.get("cudagraphs") if isinstance(data.get("cudagraphs"), dict) else {}
    compiled = [c for c in callables if isinstance(c, dict) and c.get("mode") == "compiled"]
    replayed = [_int(c.get("replayed_calls")) for c in compiled]
    sink.row("timing_summaries", {
        "rank": rank,
        "world_size": _int(data.get("world_size")),
        "device": data.get("device"),
        "gpu_name": env.get("gpu_name"),
        "cpu_model": env.get("cpu_model"),
        "compile_time_s": _float(data.get("compile_time_s")),
        "peak_mem_bytes": _int(data.get("peak_mem_bytes")),
        "peak_rss_bytes": _int(data.get("peak_rss_bytes")),
        "iteration_source": iteration.get("source") if iteration else None,
        "iteration_clock": iteration.get("clock") if iteration else None,
        "cudagraph_skips": _int(counters.get("cudagraph_skips")),
        "cudagraph_partitions": _int(counters.get("cudagraph_partitions")),
        "cudagraph_recordings": _int(cudagraphs.get("recordings")),
        "cudagraph_replays": _int(cudagraphs.get("replays")),
        "compiled_calls": sum(_int(c.get("calls")) or 0 for c in compiled),
        # only where the hooks watched CUDA graphs: elsewhere "none replayed" would be a guess
        "replayed_calls": sum(r for r in replayed if r is not None) if any(r is not None for r in replayed) else None,
    })
    if data.get("device"):
        sink.meta("device", data["device"])
