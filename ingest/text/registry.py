"""The registry: one parser per TORCH_LOGS record kind, tried in order on the first line of each
record (as tlparse's ``default_parsers()``). Each is a ``records.Parser`` (the one protocol of trace
and text parsers): ``starts(message)`` recognises a record, ``parse(record, ctx)`` reads it."""
from __future__ import annotations

from compilewatch.ingest.records import Parser
from compilewatch.ingest.text import graph_breaks, limit_hits, recompiles


def default_parsers() -> tuple[Parser, ...]:
    return (
        Parser("graph_breaks", graph_breaks.parse, starts=graph_breaks.starts),
        Parser("recompiles", recompiles.parse, starts=recompiles.starts),
        Parser("limit_hits", limit_hits.parse, starts=limit_hits.starts),
    )


PARSERS = default_parsers()


def parser_for(msg: str) -> Parser | None:
    """The parser for a record whose first message is `msg`, or None: its lines are skipped."""
    for p in PARSERS:
        if p.starts(msg):
            return p
    return None
