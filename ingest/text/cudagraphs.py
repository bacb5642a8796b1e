"""CUDA-graph skips and per-size re-recordings (the cudagraphs log, and WARNING lines every
reduce-overhead job prints): one ``cudagraph_events`` row each. Text and categories:
ingest/formats/cudagraphs.py."""
from __future__ import annotations

from compilewatch.ingest.formats import cudagraphs
from compilewatch.ingest.text.common import base_row, frames


def starts(msg: str) -> bool:
    return msg.startswith(cudagraphs.TEXT_STARTS)


def parse(rec, ctx) -> None:
    sink = ctx.sink
    first = rec.lines[0]
    row = base_row(rec)
    if first.startswith(cudagraphs.SKIP_START):
        reason, instances = cudagraphs.skip_reason(first)
        where = frames(rec.lines[1:])
        file, line, fn = where[-1] if where else (None, None, None)
        # the source line torch prints under the innermost frame
        code = next((ln.strip() for ln in rec.lines[1:] if ln.strip() and "File \"" not in ln), None)
        row.update(event="skip", category=cudagraphs.categorise(reason), reason=reason, count=instances,
                   user_file=file, user_line=line, user_function=fn, user_code=code, source="text")
    else:
        m = cudagraphs.DISTINCT_SIZES.search(" ".join(rec.lines))
        row.update(event="re_record", category="dynamic_shape",
                   reason="a new CUDA graph recorded for each distinct input size",
                   count=int(m.group(1)) if m else None, user_file=None, user_line=None, user_function=None,
                   user_code=None, source="text")
    sink.row("cudagraph_events", row)
