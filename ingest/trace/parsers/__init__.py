"""The registry: one parser per TORCH_TRACE event kind, like tlparse's ``default_parsers()``.

A parser is a function ``parse(env, ctx)`` over one Envelope (``ingest.trace.envelope``) and the
per-file TraceContext; it emits rows through ``ctx.sink``. ``event`` is the envelope's event key;
for ``artifact`` envelopes ``artifacts`` lists the artifact names it handles (a parser with event
``artifact`` and no names sees every artifact). ``finish`` runs once at the end of the file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from compilewatch.ingest.trace.parsers import artifacts as artifact_records
from compilewatch.ingest.trace.parsers import (
    cache_events,
    chromium_event,
    compilation_metrics,
    dynamo_start,
    graph_break,
    interned_string,
    recompile_reasons,
    torch_version,
)


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
        # per-compile-id artifacts: one parser per envelope kind, each storing its payload or value
        Parser("artifact", "artifact", artifact_records.parse_artifact),
        Parser("dynamo_start_stack", "dynamo_start", artifact_records.parse_stack),
        *(Parser(k, k, artifact_records.parse_payload) for k in artifact_records.PAYLOAD_EVENTS),
        *(Parser(k, k, artifact_records.parse_value) for k in artifact_records.VALUE_EVENTS),
    )


def dispatch_tables(parsers=None):
    """(event -> [parse], artifact name -> [parse], [finish]) for the reader's hot loop. Parsers of
    every artifact are listed under each name and under None (names no parser asked for)."""
    events: dict[str, list] = {}
    artifacts: dict[str, list] = {}
    every_artifact = []
    finishers = []
    for p in parsers or default_parsers():
        if p.artifacts:
            for a in p.artifacts:
                artifacts.setdefault(a, []).append(p.parse)
        elif p.event == "artifact":
            every_artifact.append(p.parse)
        else:
            events.setdefault(p.event, []).append(p.parse)
        if p.finish is not None:
            finishers.append(p.finish)
    for fns in artifacts.values():
        fns.extend(every_artifact)
    if every_artifact:
        artifacts[None] = every_artifact
    return events, artifacts, finishers
