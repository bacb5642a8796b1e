"""timings.json from the collector's hooks (shape: ingest.bundle.TIMINGS_DOC) -> step_timings rows
(mode 'iteration' is the iteration period), one timing_summaries row per file (per rank) and its
run_settings rows."""
from __future__ import annotations

import json

from compilewatch.ingest.bundle import SETTING_SOURCES


def as_int(value):
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def as_float(value):
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _inductor_counters(data: dict) -> dict:
    """dynamo_counters["inductor"]: where torch counts CUDA-graph skips and partitions."""
    counters = data.get("dynamo_counters")
    inductor = counters.get("inductor") if isinstance(counters, dict) else None
    return inductor if isinstance(inductor, dict) else {}


def read_object(stream, sink, name: str) -> dict | None:
    """One JSON object, the whole of a collector's file (`name`: what to call it in an error); None,
    with the error told to `sink`, when it is not one."""
    try:
        data = json.loads(stream.read().decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        sink.error(e.lineno, "json", f"{name} does not decode: {e.msg}", "")
        return None
    if not isinstance(data, dict):
        sink.error(1, "json", f"{name} is not an object", "")
        return None
    return data


def parse_timings(stream, sink) -> None:
    data = read_object(stream, sink, "timings.json")
    if data is None:
        return
    rank = as_int(data.get("rank"))
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
    replayed = [as_int(c.get("replayed_calls")) for c in compiled]
    sink.row("timing_summaries", {
        "rank": rank,
        "world_size": as_int(data.get("world_size")),
        "device": data.get("device"),
        "gpu_name": env.get("gpu_name"),
        "cpu_model": env.get("cpu_model"),
        "compile_time_s": as_float(data.get("compile_time_s")),
        "peak_mem_bytes": as_int(data.get("peak_mem_bytes")),
        "peak_rss_bytes": as_int(data.get("peak_rss_bytes")),
        "peak_heap_bytes": as_int(data.get("peak_heap_bytes")),
        "iteration_source": iteration.get("source") if iteration else None,
        "iteration_clock": iteration.get("clock") if iteration else None,
        "time_to_first_step_s": as_float(data.get("time_to_first_step_s")),
        "first_step_source": data.get("first_step_source") if isinstance(data.get("first_step_source"), str) else None,
        "cudagraph_skips": as_int(counters.get("cudagraph_skips")),
        "cudagraph_partitions": as_int(counters.get("cudagraph_partitions")),
        "cudagraph_recordings": as_int(cudagraphs.get("recordings")),
        "cudagraph_replays": as_int(cudagraphs.get("replays")),
        "compiled_calls": sum(as_int(c.get("calls")) or 0 for c in compiled),
        # only where the hooks watched CUDA graphs: elsewhere "none replayed" would be a guess
        "replayed_calls": sum(r for r in replayed if r is not None) if any(r is not None for r in replayed) else None,
    })
    _settings(data.get("settings"), rank, sink)
    if data.get("device"):
        sink.meta("device", data["device"])


_MAX_NAME, _MAX_VALUE = 300, 1000


def _settings(settings, rank, sink) -> None:
    """timings.json "settings" -> run_settings rows (TIMINGS_DOC); an entry of the wrong shape is
    one error, the others are kept."""
    if settings is None:
        return
    if not isinstance(settings, dict):
        sink.error(1, "payload", "settings is not an object", str(settings)[:200])
        return
    for name, entry in settings.items():
        value = entry.get("value") if isinstance(entry, dict) else None
        source = entry.get("source") if isinstance(entry, dict) else None
        if not isinstance(value, str) or source not in SETTING_SOURCES:
            sink.error(1, "payload", f"setting {str(name)[:100]!r} is not {{value: text, source: one of "
                                     f"{', '.join(SETTING_SOURCES)}}}", str(entry)[:200])
            continue
        sink.row("run_settings", {"rank": rank, "name": str(name)[:_MAX_NAME], "value": value[:_MAX_VALUE],
                                  "source": source})
