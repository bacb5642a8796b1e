"""``torch_version`` artifact (torch/_logging/_internal.py ``_log_torch_version``, written once when the
trace file opens, 2.8+): ``{"pytorch_version": "2.13.0+cpu", "commit": ..., "oss": true}``."""
from __future__ import annotations

from compilewatch.ingest.trace.parsers._util import load_json


def parse(env, ctx) -> None:
    info = load_json(env, ctx)
    if isinstance(info, dict):
        v = info.get("pytorch_version")
        if isinstance(v, str) and v:
            ctx.sink.meta("torch_version", v)
        c = info.get("commit")
        if isinstance(c, str) and c:
            ctx.sink.meta("torch_commit", c)
