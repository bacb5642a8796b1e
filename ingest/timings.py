"""timings.json from the collector's hooks (shape: ingest.bundle.TIMINGS_DOC) -> step_timings rows."""
from __future__ import annotations

import json


def parse_timings(stream, sink) -> None:
    try:
        data = json.loads(stream.read().decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        sink.error(e.lineno, "json", f"timings.json does not decode: {e.msg}", "")
        return
    if not isinstance(data, dict):
        sink.error(1, "json", "timings.json is not an object", "")
        return
    for c in data.get("callables") or []:
        if not isinstance(c, dict):
            sink.error(1, "payload", "callables entry is not an object", str(c)[:200])
            continue
        for s in c.get("steps") or []:
            try:
                sink.row("step_timings", {
                    "callable": c.get("name"),
                    "mode": c.get("mode"),
                    "step": int(s["step"]),
                    "phase": s.get("phase"),
                    "duration_ms": float(s["duration_ms"]),
                    "peak_mem_bytes": s.get("peak_mem_bytes"),
                })
            except (KeyError, TypeError, ValueError) as e:
                sink.error(1, "payload", f"step entry of {c.get('name')!r} lacks {e}", str(s)[:200])
    if data.get("device"):
        sink.meta("device", data["device"])
