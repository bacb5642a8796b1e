"""The registry: one parser per TORCH_TRACE event kind, like tlparse's ``default_parsers()``.

Each is a ``records.Parser`` (the one protocol of trace and text parsers): ``parse(env, ctx)``
over one Envelope (``ingest.trace.envelope``) and the per-file TraceContext, rows through
``ctx.sink``. ``event`` is the envelope's event key; for ``artifact`` envelopes ``artifacts`` lists
the artifact names it handles (a parser with event ``artifact`` and no names sees every artifact).
``finish`` runs once at the end of the file.
"""
from __future__ import annotations

from compilewatch.ingest.records import Parser
from compilewatch.ingest.trace.parsers import artifacts as artifact_records
from compilewatch.ingest.trace.parsers import (
    cache_events,
    chromium_event,
    compilation_metrics,
    dynamo_start,
    graph_break,
    interned_string,
    later_compile_metrics,
    recompile_reasons,
    torch_version,
    vllm_config,
    vllm_piecewise,
)
from compilewatch.ingest.formats import subgraphs


def default_parsers() -> tuple[Parser, ...]:
    return (
        Parser("interned_string", interned_string.parse, event="str"),
        Parser("dynamo_start", dynamo_start.parse, event="dynamo_start", finish=dynamo_start.finish),
        Parser("compilation_metrics", compilation_metrics.parse, event="compilation_metrics"),
        # the backward compile and the first calls' runtime work of a compile id, one parser per record kind
        *(Parser(k, later_compile_metrics.parse, event=k) for k in later_compile_metrics.EVENTS),
        Parser("graph_break", graph_break.parse, event="dynamo_graph_break_reason"),  # 2.4: its own envelope key
        Parser("graph_break_artifact", graph_break.parse, event="artifact", artifacts=("dynamo_graph_break_reason",)),
        Parser("recompile_reasons", recompile_reasons.parse, event="artifact", artifacts=("recompile_reasons",)),
        Parser("cache_events", cache_events.parse, event="artifact", artifacts=tuple(cache_events.ARTIFACTS)),
        Parser("chromium_event", chromium_event.parse, event="chromium_event", prepare=chromium_event.prepare),
        Parser("torch_version", torch_version.parse, event="artifact", artifacts=("torch_version",)),
        # vLLM's piecewise backend: a model's config, then one compile start per piece and range; the
        # records after a start are its piece's (ingest/formats/subgraphs.py)
        Parser("vllm_config", vllm_config.parse, event="artifact", artifacts=(subgraphs.CONFIG,)),
        Parser("vllm_piecewise", vllm_piecewise.parse, event="artifact", artifacts=(subgraphs.COMPILE_START,)),
        # per-compile-id artifacts: one parser per envelope kind, each storing its payload or value
        Parser("artifact", artifact_records.parse_artifact, event="artifact"),
        Parser("dynamo_start_stack", artifact_records.parse_stack, event="dynamo_start"),
        *(Parser(k, artifact_records.parse_payload, event=k, prepare=artifact_records.payload_fingerprint)
          for k in artifact_records.PAYLOAD_EVENTS),
        *(Parser(k, artifact_records.parse_value, event=k) for k in artifact_records.VALUE_EVENTS),
    )


def dispatch_tables(parsers=None):
    """(event -> [parse], artifact name -> [parse], [finish], {parse: prepare}) for the reader's hot
    loop. Parsers of every artifact are listed under each name and under None (names no parser
    asked for)."""
    events: dict[str, list] = {}
    artifacts: dict[str, list] = {}
    every_artifact = []
    finishers = []
    preparers = {}
    for p in parsers or default_parsers():
        if p.prepare is not None:
            preparers[p.parse] = p.prepare
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
    return events, artifacts, finishers, preparers


def parsers_for(events: dict, artifacts: dict, env) -> list | None:
    """The parse functions `env` goes to in the tables of dispatch_tables, in order; None when no
    parser wants it."""
    fns = events.get(env.name)
    if fns is None and env.name == "artifact":
        fns = artifacts.get(env.artifact_name) or artifacts.get(None)
    return fns
