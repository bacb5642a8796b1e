"""One parser per event kind, tried in order on the first line of each record (as tlparse's
``default_parsers()``). A parser is a module-like object with ``starts(msg)`` and
``parse(record, ctx, sink)``."""
from __future__ import annotations

from compilewatch.ingest.text import cudagraphs, graph_breaks, limit_hits, recompiles

PARSERS = (
    ("graph_breaks", graph_breaks),
    ("recompiles", recompiles),
    ("limit_hits", limit_hits),
    ("cudagraphs", cudagraphs),
)


# Facts only the text log carries (a TORCH_TRACE has no CUDA-graph skip reasons): parsed from a
# bundle's torch_logs.txt even when its trace is the source of everything else.
TEXT_ONLY = frozenset({"cudagraphs"})


def parser_for(msg: str, text_only: bool = False):
    for name, p in PARSERS:
        if (not text_only or name in TEXT_ONLY) and p.starts(msg):
            return name, p
    return None, None
