"""Per-file state the parsers share while one TORCH_TRACE log streams past.

Everything here is bounded by the number of frames / compiles / open chromium spans in the log, never
by its size in bytes.
"""
from __future__ import annotations

from compilewatch.ingest.trace.compressor import Compressor
from compilewatch.ingest.trace.envelope import TraceStats

_MAX_OPEN_SPANS = 10_000


class TraceContext:
    def __init__(self, sink, stats: TraceStats, raw_refs: bool = False):
        self.sink = sink
        self.stats = stats
        # payloads are left where they lie in the file: an artifact row holds their place in the raw
        # copy the store keeps of this very file (parsers/artifacts.py); else each is compressed
        self.raw_refs = raw_refs
        self.compressor = Compressor(sink)   # artifact rows: payloads compressed on another core
        # str envelopes: index -> file name (torch/_logging/structured.py intern_string)
        self.strings: dict[int, str] = {}
        # frame keys (rank, ca id, frame_id, frame_compile_id) with a dynamo_graph_break_reason artifact,
        # so restart_reasons of the same compile are not counted a second time
        self.break_artifacts: set[tuple] = set()
        # frame key -> recompile_no given when its recompile_reasons artifact arrived
        self.recompile_nos: dict[tuple, int] = {}
        self.recompile_reasons: dict[tuple, str] = {}
        self.recompile_count = 0
        # (rank, ca id, frame_id) -> co_name of that frame, for guard_failures.function
        self.frame_functions: dict[tuple, str] = {}
        # frame key -> (line_no, compile_id, rank, function, file, line) of dynamo_start without metrics yet
        self.started: dict[tuple, tuple] = {}
        # chromium "B" events waiting for their "E": (pid, tid, name, compile_id) -> [(ts, line_no)]
        self.open_spans: dict[tuple, list] = {}
        self.open_span_count = 0
        # vLLM's piecewise backend (ingest/formats/subgraphs.py): the line of the compile start whose
        # piece the records after it belong to, and which compiled model (compilation config) it is of
        self.piece_line: int | None = None
        self.vllm_configs = 0
        self.vllm_model = 0
        # (rank, cache) -> (line_no, {component name: hash}) of the file's latest lookup of that cache
        # with key components: the next keeps only what differs from it (parsers/cache_events.py)
        self.cache_key_bases: dict[tuple, tuple[int, dict[str, str]]] = {}
        # hashes of key components whose long text is written in this file already
        self.cache_key_texts: set[str] = set()

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.sink.error(line_no, kind, message, excerpt)

    def next_recompile_no(self) -> int:
        self.recompile_count += 1
        return self.recompile_count

    def intern(self, value):
        """A stack frame's filename: an index into the str table (2.4+) or a plain string (older)."""
        if isinstance(value, int) and not isinstance(value, bool):
            return self.strings.get(value)
        return value if isinstance(value, str) else None

    def push_span(self, key, item) -> None:
        if self.open_span_count >= _MAX_OPEN_SPANS:
            return  # a log of only "B" events must not grow memory without bound
        self.open_spans.setdefault(key, []).append(item)
        self.open_span_count += 1

    def pop_span(self, key):
        stack = self.open_spans.get(key)
        if not stack:
            return None
        item = stack.pop()
        if not stack:
            del self.open_spans[key]
        self.open_span_count -= 1
        return item
