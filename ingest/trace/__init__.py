"""TORCH_TRACE (structured trace) reader: ``parse_trace(stream, sink)``.

``stream`` is a binary file object (or any iterable of bytes lines); rows, errors and run facts go to
``sink`` (ingest.records.Sink). Never raises on bad input. For a log that arrives in pieces use
``TraceParser``: ``feed()`` each piece in order, then ``close()``; the records are the same as for the
whole file.
"""
from __future__ import annotations

from compilewatch.ingest.trace.context import TraceContext
from compilewatch.ingest.trace.envelope import EnvelopeReader, TraceStats
from compilewatch.ingest.trace.parsers import default_parsers, dispatch_tables, parsers_for

__all__ = ["parse_trace", "TraceParser", "default_parsers"]


class TraceParser:
    def __init__(self, sink, parsers=None, raw_refs: bool = False):
        self.sink = sink
        self.stats = TraceStats()
        self.reader = EnvelopeReader(sink, self.stats)
        self.ctx = TraceContext(sink, self.stats, raw_refs)
        self._events, self._artifacts, self._finishers, _ = dispatch_tables(parsers)

    def feed(self, stream) -> None:
        for env in self.reader.envelopes(stream):
            self.dispatch(env)

    def dispatch(self, env) -> None:
        """Hand one envelope, read here or by another process (ingest/trace_ranges.py), to its parsers."""
        fns = parsers_for(self._events, self._artifacts, env)
        if fns is not None:
            self._run(fns, env)

    def _run(self, fns, env) -> None:
        for fn in fns:
            try:
                fn(env, self.ctx)
            except Exception as e:  # a parser bug costs one record, never the file
                self.ctx.error(env.line_no, "payload",
                               f"{env.artifact_name or env.name} record could not be parsed: {type(e).__name__}: {e}")

    def close(self) -> TraceStats:
        env = self.reader.close()
        if env is not None:
            self.dispatch(env)
        self.ctx.compressor.flush()
        for finish in self._finishers:
            finish(self.ctx)
        if self.stats.unknown_events or self.stats.unknown_keys:
            self.sink.meta("trace_unknown_keys", {**self.stats.unknown_events, **self.stats.unknown_keys})
        self.sink.meta("trace_stats", self.stats.as_dict())
        return self.stats


def parse_trace(stream, sink, raw_refs: bool = False) -> TraceStats:
    """Parse one TORCH_TRACE log from ``stream`` into ``sink``; returns the reader's counts.
    `raw_refs`: ``stream`` is byte for byte the raw copy the store keeps of the file, and artifact
    rows point into it rather than hold their payloads (parsers/artifacts.py)."""
    p = TraceParser(sink, raw_refs=raw_refs)
    try:
        p.feed(stream)
    finally:   # a read error ends the file early: the rows parsed before it still reach the sink
        p.ctx.compressor.flush()
    return p.close()
