"""The registry: one parser per TORCH_LOGS record kind, tried in order on the first line of each
record (as tlparse's ``default_parsers()``). Each is a ``records.Parser`` (the one protocol of trace
and text parsers): ``starts(message)`` recognises a record, ``parse(record, ctx)`` reads it."""
from __future__ import annotations

from compilewatch.ingest.records import Parser
from compilewatch.ingest.text import cudagraphs, graph_breaks, limit_hits, recompiles


def default_parsers() -> tuple[Parser, ...]:
    return (
        Parser("graph_breaks", graph_breaks.parse, starts=graph_breaks.starts, component="graph_breaks"),
        Parser("recompiles", recompiles.parse, starts=recompiles.starts, component="recompiles"),
        # "torch._dynamo hit config.recompile_limit" is a warning of dynamo's own logger: always on
        Parser("limit_hits", limit_hits.parse, starts=limit_hits.starts),
        # torch 2.11+ writes its skip reasons through the `cudagraphs` artifact logger alone, which
        # prints nothing, warnings included, unless TORCH_LOGS names it
        Parser("cudagraphs", cudagraphs.parse, starts=cudagraphs.starts, component="cudagraphs"),
    )


PARSERS = default_parsers()

# The TORCH_LOGS components whose records some parser reads, in the registry's order.
COMPONENTS = tuple(dict.fromkeys(p.component for p in PARSERS if p.component))

# Facts only the text log carries (a TORCH_TRACE has no CUDA-graph skip reasons): parsed from a
# bundle's torch_logs.txt even when its trace is the source of everything else.
TEXT_ONLY = frozenset({"cudagraphs"})
_TEXT_ONLY_PARSERS = tuple(p for p in PARSERS if p.name in TEXT_ONLY)


def parser_for(msg: str, text_only: bool = False) -> Parser | None:
    """The parser for a record whose first message is `msg`, or None: its lines are skipped.
    `text_only`: among the TEXT_ONLY parsers alone."""
    for p in _TEXT_ONLY_PARSERS if text_only else PARSERS:
        if p.starts(msg):
            return p
    return None
