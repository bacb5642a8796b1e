"""The gate's metrics: name, unit, which direction is better, and how a run's values are judged.

The per-run values come from the store (``series``); this table says how to read them. A metric's
``kind`` picks the rule in ``detect``: timings and memory move with noise and are judged by ratio and
spread; counts of compile events are exact per run, so any rise beyond the baseline's own range counts.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str          # "x", "ms", "s", "bytes", "count", "ratio" (as run_metrics writes them)
    direction: str     # "higher" or "lower" is better
    kind: str          # "timing" | "count" | "info" (shown, never gated)

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("speedup", "Speedup (compiled over eager)", "x", "higher", "timing"),
    Metric("step_time", "Step time (compiled callable, steady)", "ms", "lower", "timing"),
    Metric("iteration_time", "Iteration time (training step, end to end)", "ms", "lower", "timing"),
    Metric("compile_time", "Compile time (fwd + bwd + autotune, incl. recompiles)", "s", "lower", "timing"),
    Metric("time_to_first_step", "Time to first step (process start to first completed step)", "s", "lower",
           "timing"),
    Metric("peak_memory", "Peak memory", "bytes", "lower", "timing"),
    Metric("graph_breaks", "Graph breaks", "count", "lower", "count"),
    Metric("recompiles", "Recompiles", "count", "lower", "count"),
    Metric("limit_hits", "Recompile-limit hits", "count", "lower", "count"),
    Metric("failures", "Failed compiles", "count", "lower", "count"),
    Metric("cache_hit_rate", "Compile-cache hit rate", "ratio", "higher", "info"),
    # the machine's speed, not the code's: evidence for the timings' verdicts (review/evidence.py)
    Metric("host_probe", "Host probe (fixed workload, before and after the job)", "ms", "lower", "info"),
    Metric("cudagraph_skips", "CUDA-graph skips", "count", "lower", "count"),
    # CUDA-graph coverage (review/cudagraph_coverage.py words it as one change). A graph split
    # around a CPU op is exact per run, so gated; the rest move with input sizes and step counts.
    Metric("cudagraph_partitions", "CUDA-graph partitions", "count", "lower", "count"),
    Metric("cudagraph_graphs", "CUDA graphs recorded", "count", "higher", "info"),
    Metric("cudagraph_rerecords", "CUDA-graph re-recordings", "count", "lower", "info"),
    Metric("cudagraph_replay_share", "Compiled calls replayed from a CUDA graph", "ratio", "higher", "info"),
)}

# Compile-bound timings: paid once per run (not per step) and judged apart per compile-cache state,
# since a cold compile costs several times a warm one.
COMPILE_METRICS = ("compile_time", "time_to_first_step")


def metric(name: str) -> Metric:
    """The catalogue entry; a metric the catalogue does not know (a newer store) is a lower-is-better
    timing, shown but judged only by the generic ratio rule."""
    return METRICS.get(name) or Metric(name, name.replace("_", " "), "", "lower", "info")


def fmt(value, unit: str) -> str:
    """A value with its unit, for verdict sentences and the report."""
    if value is None or value != value:
        return "–"
    if unit == "x":
        return f"{value:.3f}x"
    if unit == "ms":
        return f"{value:,.2f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    if unit == "bytes":
        return f"{value / 2**20:,.1f} MiB"
    if unit == "ratio":
        return f"{100 * value:.0f}%"
    if unit == "count":
        unit = ""
    return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"
