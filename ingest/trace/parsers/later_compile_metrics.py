"""The metrics records torch writes for a compile id after its ``compilation_metrics``: the
backward compile and the first calls' runtime work. A job waits for them as it waits for the
forward compile, so a run's compile time counts them (store/compile_time.py); one
``later_compile_metrics`` row per record.

- ``bwd_compilation_metrics`` (2.4+): AOTAutograd compiles a training graph's backward lazily, at
  the first backward call (torch/_functorch/_aot_autograd/runtime_wrappers.py, under
  dynamo_timed "entire_backward_compile"), unless the backward saves symbolic sizes (dynamic
  shapes), when it is compiled inside the forward's compile and its time is already in the
  forward's entire_frame_compile_time_s (and no record is written). 2.6+ time the whole backward
  compile in ``backward_cumulative_compile_time_us``; 2.4/2.5's BwdCompilationMetrics had only
  Inductor's part (``inductor_compile_time_s``), which is taken where nothing better is logged.
- ``aot_autograd_backward_compilation_metrics`` (the older name, 2.3-2.4): ``elapsed_time`` in
  seconds, the whole lazy backward compile.
- ``compilation_metrics_runtime`` / ``bwd_compilation_metrics_runtime`` (2.6+): work at the first
  calls of the compiled forward / backward: Triton autotuning (``runtime_triton_autotune_time_us``)
  and CUDA-graph recording (``runtime_cudagraphify_time_us``).

The records carry the frame compile's id without the attempt of its compilation_metrics (a compile
that restarted is "0/0_1" there, "0/0" in a runtime record): the rows keep the frame id and the
frame compile id, which is what joins them to their compile.
"""
from __future__ import annotations

from compilewatch.ingest.trace.envelope import format_compile_id
from compilewatch.ingest.trace.parsers._util import as_float, as_str
from compilewatch.ingest.trace.parsers.compilation_metrics import compile_ids

BACKWARD_EVENTS = ("bwd_compilation_metrics", "aot_autograd_backward_compilation_metrics")
RUNTIME_EVENTS = ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime")
EVENTS = BACKWARD_EVENTS + RUNTIME_EVENTS

# The backward compile's seconds, by the first field a record carries: (field, seconds per unit).
# The whole compile first; Inductor's part alone (2.4/2.5) only where nothing else is logged.
_BACKWARD_FIELDS = (("backward_cumulative_compile_time_us", 1e-6), ("elapsed_time", 1.0),
                    ("inductor_compile_time_s", 1.0), ("inductor_cumulative_compile_time_us", 1e-6))


def _seconds(m: dict, fields) -> float | None:
    for name, scale in fields:
        v = as_float(m.get(name))
        if v is not None:
            return v * scale
    return None


def parse(env, ctx) -> None:
    m = env.value
    if not isinstance(m, dict):
        ctx.error(env.line_no, "json", f"{env.name} value is not a JSON object", str(m)[:200])
        return
    ca, frame_id, fci, _ = compile_ids(env, m)
    runtime = env.name in RUNTIME_EVENTS
    start = as_float(m.get("start_time"))
    if start is None:
        us = as_float(m.get("start_time_us"))
        start = None if us is None else us / 1e6
    ctx.sink.row("later_compile_metrics", {
        "line_no": env.line_no, "compile_id": format_compile_id(ca, frame_id, fci, None),
        "compiled_autograd_id": ca, "frame_id": frame_id, "frame_compile_id": fci, "rank": env.rank,
        "event": env.name, "start_time": start,
        "backward_compile_time_s": None if runtime else _seconds(m, _BACKWARD_FIELDS),
        "runtime_autotune_time_s": _seconds(m, (("runtime_triton_autotune_time_us", 1e-6),)) if runtime else None,
        "runtime_cudagraphify_time_s": _seconds(m, (("runtime_cudagraphify_time_us", 1e-6),)) if runtime else None,
        "fail_type": as_str(m.get("fail_type")),
    })
