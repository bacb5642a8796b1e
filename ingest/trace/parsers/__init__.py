"""The registry: one parser per TORCH_TRACE event kind, like tlparse's ``default_parsers()``.

A parser is a function ``parse(env, ctx)`` over one Envelope (``ingest.trace.envelope``) and the
per-file TraceContext; it emits rows through ``ctx.sink``. ``event`` is the envelope's event key;
for ``artifact`` envelopes ``artifacts`` lists the artifact names it handles. ``finish`` runs once
at the end of the file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import (cache_events, chromium_event, compilation_metrics, dynamo_start, graph_break, interned_string,
               recompile_reasons, torch_version)


@dataclass(frozen=True)
class Parser:
    name: str
    event: str
    parse: Callable
    artifacts: tuple = ()
    finish: Callable | None = None


def default_parsers() -> tuple:
    return (
        Parser("interned_string", "str", interned_string.parse),
        Parser("dynamo_start", "dynamo_start", dynamo_start.parse, finish=dynamo_start.finish),
        Parser("compilation_metrics", "compilation_metrics", compilation_metrics.parse),
        Parser("graph_break", "dynamo_graph_break_reason", graph_break.parse),  # 2.4: its own envelope key
        Parser("graph_break_artifact", "artifact", graph_break.parse, artifacts=("dynamo_graph_break_reason",)),
        Parser("recompile_reasons", "artifact", recompile_reasons.parse, artifacts=("recompile_reasons",)),
        Parser("cache_events", "artifact", cache_events.parse, artifacts=tuple(cache_events.ARTIFACTS)),
        Parser("chromium_event", "chromium_event", chromium_event.parse),
        Parser("torch_version", "artifact", torch_version.parse, artifacts=("torch_version",)),
    )


def dispatch_tables(parsers=None):
    """(event -> [parse], artifact name -> [parse], [finish]) for the reader's hot loop."""
    events: dict[str, list] = {}
    artifacts: dict[str, list] = {}
    finishers = []
    for p in parsers or default_parsers():
        if p.artifacts:
            for a in p.artifacts:
                artifacts.setdefault(a, []).append(p.parse)
        else:
            events.setdefault(p.event, []).append(p.parse)
        if p.finish is not None:
            finishers.append(p.finish)
    return events, artifacts, finishers
