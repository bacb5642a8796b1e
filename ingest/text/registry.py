"""One parser per event kind, tried in order on the first line of each record (as tlparse's
``default_parsers()``). A parser is a module-like object with ``starts(msg)`` and
``parse(record, ctx, sink)``."""
from __future__ import annotations

from compilewatch.ingest.text import graph_breaks, limit_hits, recompiles

PARSERS = (
    ("graph_breaks", graph_breaks),
    ("recompiles", recompiles),
    ("limit_hits", limit_hits),
)


def parser_for(msg: str):
    for name, p in PARSERS:
        if p.starts(msg):
            return name, p
    return None, None
