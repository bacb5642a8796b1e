"""A bundle's manifest.json -> host_probes rows, one per probe of its "host_probe"
(ingest.bundle.HOST_PROBE_DOC). The manifest's other fields are the run's (ingest/commit.py
run_fields); a manifest without a host probe gives no rows."""
from __future__ import annotations

import math

from compilewatch.ingest.timings import as_float, as_int, read_object

PHASES = ("before", "after")


def _text(value, limit=300):
    return None if value is None else str(value)[:limit]


def parse_manifest(stream, sink) -> None:
    data = read_object(stream, sink, "manifest.json")
    if data is None:
        return
    probe = data.get("host_probe")
    if probe is None:
        return
    if not isinstance(probe, dict):
        sink.error(1, "payload", "host_probe is not an object", str(probe)[:200])
        return
    for phase in PHASES:
        p = probe.get(phase)
        if p is None:
            continue
        if not isinstance(p, dict):
            sink.error(1, "payload", f"host_probe.{phase} is not an object", str(p)[:200])
            continue
        samples = p.get("samples_ms")
        median = as_float(p.get("median_ms"))
        if median is not None and not math.isfinite(median):
            median = None
        error = _text(p.get("error"), 1000)
        if median is None and error is None:
            sink.error(1, "payload", f"host_probe.{phase} has neither median_ms nor error", str(p)[:200])
            continue
        sink.row("host_probes", {
            "phase": phase,
            "device": _text(p.get("device")),
            "device_name": _text(p.get("device_name")),
            "threads": as_int(p.get("threads")),
            "workload": _text(p.get("workload")),
            "median_ms": median,
            "iqr_ms": as_float(p.get("iqr_ms")),
            "min_ms": as_float(p.get("min_ms")),
            "samples": len(samples) if isinstance(samples, list) else None,
            "process_s": as_float(p.get("process_s")),
            "load_avg": as_float(p.get("load_avg")),
            "error": error,
        })
