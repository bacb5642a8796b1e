"""Streaming reader of TORCH_TRACE structured logs.

A TORCH_TRACE file is written by ``torch._logging._internal.TorchLogsFormatter`` (trace mode) as::

    V0403 07:28:48.051000 139877824898048 torch/_dynamo/convert_frame.py:672] {"dynamo_start": {...}, "frame_id": 0, "has_payload": "<md5>"}
    \t<payload line 1>
    \t<payload line 2>

one glog prefix + JSON envelope per record, then (when the envelope says ``has_payload``) the payload,
each of its lines prefixed with a tab. ``trace_structured`` computes ``has_payload`` as the md5 of the
payload string, i.e. of the payload lines with their leading tab removed, joined by ``\\n`` (tlparse's
``src/lib.rs`` checks it the same way). ``{"str": ["path", idx]}`` envelopes intern file names that
later stack frames refer to by index.

The reader reads a file object in 1 MiB blocks (any other iterable of lines, line by line): a run of
payload lines is found with one regex search and kept as one slice of the block, so a record costs
a few Python steps whatever its length; only envelope lines are json-decoded; payloads are
md5-checked in C (``bytes.replace`` of the tabs + ``hashlib.md5``, every payload, as tlparse does)
and decoded to text only when a parser asks. Memory is bounded by the largest single record, not by
the file. (Measured on a 112 MB real trace: 3-5% less CPU than a Python step per payload line; the
md5, the tab stripping and the artifacts' compression dominate.)

Nothing here raises on bad input: every problem is reported with ``sink.error(line_no, kind, ...)``
using the kinds of ``ingest.records.ERROR_KINDS`` and reading goes on.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter

from compilewatch.ingest.formats import glog
from compilewatch.ingest.jsonfast import loads

# glog prefix as TorchLogsFormatter writes it: level, MMDD, time with microseconds, process/thread id,
# module path relative to sys.path, line number. tlparse's re_glog is the same shape; the optional
# "[rankN]:" prefix only appears in TORCH_LOGS text, accepted here for files that went through it.
_GLOG = glog.PREFIX_BYTES
_LEVELS = tuple(c.encode() for c in glog.LEVEL_LETTERS)

# Keys an envelope carries besides its one event key (see trace_structured in torch/_logging/_internal.py).
CONTEXT_KEYS = frozenset(
    ("rank", "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload", "stack",
     "subgraph_name")
)

# Event keys seen in PyTorch 2.2-2.13 traces (tlparse's Envelope plus the ones it keeps in _other).
KNOWN_EVENTS = frozenset((
    "str", "dynamo_start", "dynamo_output_graph", "optimize_ddp_split_graph", "optimize_ddp_split_child",
    "compiled_autograd_graph", "dynamo_guards", "dynamo_cpp_guards_str", "aot_forward_graph",
    "aot_backward_graph", "aot_inference_graph", "aot_joint_graph", "inductor_pre_grad_graph",
    "inductor_post_grad_graph", "inductor_output_code", "compilation_metrics", "compilation_metrics_runtime",
    "bwd_compilation_metrics", "aot_autograd_backward_compilation_metrics", "graph_dump", "link",
    "symbolic_shape_specialization", "propagate_real_tensors", "propagate_real_tensors_provenance",
    "guard_added", "guard_added_fast", "create_symbol", "create_unbacked_symbol", "expression_created",
    "missing_fake_kernel", "mismatched_fake_kernel", "artifact", "describe_storage", "describe_tensor",
    "describe_source", "dump_file", "chromium_event", "exported_program", "dynamo_graph_break_reason",
    "dynamo_error",
))

_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
# the end of a run of payload lines: a newline followed by anything but the payload tab
_PAYLOAD_RUN_END = re.compile(rb"\n[^\t]")
_CHUNK = 1 << 20
_EXCERPT = 200


def format_compile_id(compiled_autograd_id, frame_id, frame_compile_id, attempt) -> str | None:
    """tlparse's CompileId Display without brackets: ``[!ca/]frame/compile[_attempt]``; None when the
    envelope carries no id at all (export, AOT and runtime records)."""
    if frame_id is None and frame_compile_id is None and compiled_autograd_id is None:
        return None
    s = f"{'-' if frame_id is None else frame_id}/{'-' if frame_compile_id is None else frame_compile_id}"
    if attempt:
        s = f"{s}_{attempt}"
    if compiled_autograd_id is not None:
        s = f"!{compiled_autograd_id}/{s}"
    return s


def _int_or_none(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    return None


class Envelope:
    """One decoded record: the event key and value, its compile id, rank, and raw payload bytes.
    Ids are read from the envelope on first use: most records are never asked."""

    __slots__ = ("line_no", "name", "value", "data", "payload_bytes", "payload_ok", "payload_z", "payload_size",
                 "prepared", "raw_start", "raw_end", "_payload", "_ids")

    def __init__(self, line_no: int, name: str, data: dict):
        self.line_no = line_no
        self.name = name
        self.data = data
        self.value = data.get(name)
        self.payload_bytes = None
        self.payload_ok = True   # False when the payload failed its md5 (already counted)
        # the payload compressed as an artifact row stores it (trace/compressor.py), and its size, by
        # the process that read this part of the file (ingest/trace_ranges.py); payload_bytes is then None
        self.payload_z = None
        self.payload_size = 0
        self.prepared = None     # what its parser's prepare() made of it there (records.Parser)
        # where the record lies in the stream read (byte offsets: its envelope line up to the line
        # that ended its payload); None when read line by line. A fresh reader given these bytes
        # alone reads this record with the same payload (see read_one).
        self.raw_start = None
        self.raw_end = None
        self._payload = None
        self._ids = None

    def _get_ids(self):
        d = self.data
        ca, fid, fci, att = (_int_or_none(d.get("compiled_autograd_id")), _int_or_none(d.get("frame_id")),
                             _int_or_none(d.get("frame_compile_id")), _int_or_none(d.get("attempt")))
        self._ids = ids = (_int_or_none(d.get("rank")), ca, fid, fci, att, format_compile_id(ca, fid, fci, att))
        return ids

    rank = property(lambda self: (self._ids or self._get_ids())[0])
    compiled_autograd_id = property(lambda self: (self._ids or self._get_ids())[1])
    frame_id = property(lambda self: (self._ids or self._get_ids())[2])
    frame_compile_id = property(lambda self: (self._ids or self._get_ids())[3])
    attempt = property(lambda self: (self._ids or self._get_ids())[4])
    compile_id = property(lambda self: (self._ids or self._get_ids())[5])

    @property
    def artifact_name(self) -> str | None:
        v = self.value
        if self.name == "artifact" and isinstance(v, dict):
            n = v.get("name")
            return n if isinstance(n, str) else None
        return None

    @property
    def frame_key(self):
        """Identifies one compile of a frame across its attempts (restarts)."""
        return (self.rank, self.compiled_autograd_id, self.frame_id, self.frame_compile_id)

    @property
    def payload(self) -> str | None:
        if self._payload is None and self.payload_bytes is not None:
            self._payload = self.payload_bytes.decode("utf-8", "replace")
        return self._payload


class TraceStats:
    """What the reader saw, reported through ``sink.meta('trace_stats', ...)``. Errors are not
    counted here: every one goes to ``sink.error`` and is counted once, by the pipeline."""

    def __init__(self) -> None:
        self.lines = 0
        self.envelopes = 0
        self.payloads = 0
        self.events: Counter = Counter()
        self.unknown_events: Counter = Counter()
        self.unknown_keys: Counter = Counter()
        self.blank_lines = 0

    def add(self, other: "TraceStats") -> None:
        """Count in what another reader saw (a range of the same file, ingest/trace_ranges.py)."""
        self.lines += other.lines
        self.envelopes += other.envelopes
        self.payloads += other.payloads
        self.blank_lines += other.blank_lines
        self.events.update(other.events)
        self.unknown_events.update(other.unknown_events)
        self.unknown_keys.update(other.unknown_keys)

    def as_dict(self) -> dict:
        return {
            "lines": self.lines,
            "envelopes": self.envelopes,
            "payloads": self.payloads,
            "blank_lines": self.blank_lines,
            "events": dict(self.events),
            "unknown_events": dict(self.unknown_events),
            "unknown_keys": dict(self.unknown_keys),
        }


def _excerpt(raw: bytes) -> str:
    return raw[:_EXCERPT].decode("utf-8", "replace").rstrip("\r\n")


class EnvelopeReader:
    """Turns lines into Envelopes. Keeps the half-read payload between ``envelopes()`` calls, so a log
    fed in several pieces reads exactly like the whole (see TraceParser.feed)."""

    def __init__(self, sink, stats: TraceStats | None = None, line_offset: int = 0, byte_offset: int = 0):
        self.sink = sink
        self.stats = stats or TraceStats()
        self.line_no = line_offset
        # the stream offset of the next byte to read, and of the line _line is given (None once a
        # stream was read line by line: no offsets then)
        self.pos: int | None = byte_offset
        self._at: int | None = byte_offset
        self._pending: Envelope | None = None   # envelope whose payload lines are being collected
        self._expect: str = ""
        self._lines: list = []
        self._blanks = 0
        self._orphans = 0                       # payload lines with no envelope before them
        self._orphan_line = 0
        self._last_newline = True

    def _error(self, line_no: int, kind: str, msg: str, excerpt: str = "") -> None:
        self.sink.error(line_no, kind, msg, excerpt)

    def _flush_orphans(self) -> None:
        if self._orphans:
            self._error(self._orphan_line, "payload",
                        f"{self._orphans} tab-indented payload line(s) with no envelope announcing a payload")
            self._orphans = 0

    def _finish_payload(self, at_eof: bool = False) -> Envelope:
        env = self._pending
        env.raw_end = self.pos if at_eof else self._at
        lines = self._lines
        self._pending = None
        self._lines = []
        self.stats.blank_lines += self._blanks
        self._blanks = 0
        data = b"".join(lines)
        end = len(data) - 1 if data.endswith(b"\n") else len(data)
        # every line starts with a tab: drop the first one and each one that follows a newline
        body = data[1:end].replace(b"\n\t", b"\n")
        self.stats.payloads += 1
        expect = self._expect
        digest = hashlib.md5(body).hexdigest()
        if digest != expect and b"\r" in body:
            # a CRLF-converted file: the \r was not part of what torch hashed
            alt = body.replace(b"\r\n", b"\n")
            if alt.endswith(b"\r"):
                alt = alt[:-1]
            if hashlib.md5(alt).hexdigest() == expect:
                body, digest = alt, expect
        if digest != expect:
            # counted only here, for the message: the lines of every good payload are not needed
            n_lines = data.count(b"\n", 0, end) + 1 if data else 0
            if not _HEX32.match(expect):
                self._error(env.line_no, "payload_md5", f"has_payload is not an md5 hex digest: {expect[:60]!r}")
            elif at_eof and not self._last_newline:
                self._error(env.line_no, "truncated",
                            f"file ends inside the payload of this {env.name} record ({n_lines} line(s) read)")
            elif not n_lines:
                self._error(env.line_no, "payload", f"{env.name} record announces a payload but none follows")
            else:
                self._error(env.line_no, "payload_md5",
                            f"payload of {env.name} record ({n_lines} line(s)) does not match has_payload md5")
            env.payload_ok = False
        env.payload_bytes = body
        return env

    def envelopes(self, stream):
        """Yield each Envelope of ``stream`` (a binary file object or any iterable of bytes lines),
        payload attached."""
        start = self.line_no
        read = getattr(stream, "read", None)
        try:
            yield from (self._from_blocks(read) if read is not None else self._from_lines(stream))
        finally:
            self.stats.lines += self.line_no - start

    def _line(self, raw: bytes, out: list) -> None:
        """The reader's whole state machine, one line at a time; _from_lines only short-cuts payload
        lines, appending them exactly as this would."""
        self.line_no += 1
        if raw[:1] == b"\t":
            if self._pending is not None:
                if self._blanks:
                    # tlparse: "a blank line in payload will still be \t"; an editor that strips
                    # trailing whitespace turns it into an empty line, so put the tab back
                    self._lines.extend([b"\t\n"] * self._blanks)
                    self._blanks = 0
                self._lines.append(raw)
            else:
                if not self._orphans:
                    self._orphan_line = self.line_no
                self._orphans += 1
            return
        if self._pending is not None:
            if raw == b"\n" or raw == b"\r\n":
                self._blanks += 1
                return
            out.append(self._finish_payload())
        if self._orphans:
            self._flush_orphans()
        env = self._envelope(raw, self.line_no)
        if env is not None:
            at = env.raw_start = self._at
            env.raw_end = at + len(raw) if at is not None else None
            expect = env.data.get("has_payload")
            if expect is not None:
                self._expect = expect if isinstance(expect, str) else repr(expect)
                self._pending = env
            else:
                out.append(env)

    def _from_lines(self, stream):
        self.pos = self._at = None   # lines may have been changed on their way: no byte offsets
        out: list = []
        tab = b"\t"
        raw = None
        lines = self._lines
        collecting = self._pending is not None and not self._blanks
        n = 0
        try:
            for raw in stream:
                if collecting and raw[:1] == tab:
                    lines.append(raw)
                    n += 1
                    continue
                self.line_no += n
                n = 0
                self._line(raw, out)
                lines = self._lines
                collecting = self._pending is not None and not self._blanks
                if out:
                    yield from out
                    out.clear()
        finally:
            self.line_no += n
            if raw is not None:
                self._last_newline = raw.endswith(b"\n")

    def _from_blocks(self, read):
        """As _from_lines, reading blocks: a run of payload lines is found with one regex search
        and kept as one slice of the block, so the Python step is per record, not per line (payload
        lines are ~97% of a trace's lines)."""
        out: list = []
        pending = b""
        parts: list = []   # blocks of one line longer than a block (binary garbage): joined once
        track = self.pos is not None   # not after lines read one by one: offsets stay unknown then
        base = self.pos or 0           # the stream offset of buf[0]
        while True:
            chunk = read(_CHUNK)
            if not chunk:
                break
            if b"\n" not in chunk:
                parts.append(chunk)
                continue
            if parts:
                buf = b"".join((pending, *parts, chunk))
                parts.clear()
            else:
                buf = pending + chunk if pending else chunk
            cut = buf.rfind(b"\n") + 1
            pending = buf[cut:] if cut < len(buf) else b""
            pos = 0
            while pos < cut:
                if buf[pos] == 9 and self._pending is not None and not self._blanks:
                    m = _PAYLOAD_RUN_END.search(buf, pos, cut)
                    stop = m.start() + 1 if m is not None else cut
                    region = buf[pos:stop]
                    self._lines.append(region)
                    self.line_no += region.count(b"\n")
                    pos = stop
                    continue
                stop = buf.index(b"\n", pos) + 1
                if track:
                    self._at = base + pos
                self._line(buf[pos:stop], out)
                pos = stop
                if out:
                    yield from out
                    out.clear()
            base += cut
            if track:
                self.pos = self._at = base
            self._last_newline = True
        if parts:
            pending = b"".join((pending, *parts))
        if pending:   # the file ends without a newline
            if track:
                self._at = base
            self._line(pending, out)
            if track:
                self.pos = base + len(pending)
            self._last_newline = False
            yield from out

    def close(self):
        """End of input: returns the last envelope if it was waiting for more payload, else None."""
        self._flush_orphans()
        if self._pending is not None:
            return self._finish_payload(at_eof=True)
        return None

    def _envelope(self, raw: bytes, line_no: int) -> Envelope | None:
        stats = self.stats
        if b"\x00" in raw:
            self._error(line_no, "binary", "NUL bytes in line", _excerpt(raw.replace(b"\x00", b"\\0")))
            raw = raw.replace(b"\x00", b"")
            if not raw.strip():
                return None
        m = _GLOG.match(raw)
        if m is None:
            if not raw.strip():
                stats.blank_lines += 1
                return None
            if not _is_text(raw):
                kind, msg = "binary", "binary garbage"
            elif not raw.endswith(b"\n") and raw[:1] in _LEVELS:
                kind, msg = "truncated", "file ends inside a glog prefix"
            else:
                kind, msg = "glog", "line has no glog prefix"
            self._error(line_no, kind, msg, _excerpt(raw))
            return None
        body = raw[m.end():]
        try:
            data = loads(body)
        except UnicodeDecodeError:
            self._error(line_no, "encoding", "envelope is not valid UTF-8; decoded with replacement", _excerpt(raw))
            try:
                data = json.loads(body.decode("utf-8", "replace"))
            except ValueError as e:
                self._error(line_no, "json", f"envelope JSON does not decode: {e}", _excerpt(raw))
                return None
        except ValueError as e:
            kind = "truncated" if not raw.endswith(b"\n") else "json"
            self._error(line_no, kind, f"envelope JSON does not decode: {e}", _excerpt(raw))
            return None
        if not isinstance(data, dict) or not data:
            self._error(line_no, "json", "envelope is not a JSON object with an event key", _excerpt(raw))
            return None
        stats.envelopes += 1
        name = None
        for k in data:
            if k not in CONTEXT_KEYS:
                if name is None:
                    name = k
                else:
                    # trace_structured writes exactly one event key; more means a newer torch
                    stats.unknown_keys[k] += 1
        if name is None:
            self._error(line_no, "json", "envelope has no event key", _excerpt(raw))
            return None
        if name not in KNOWN_EVENTS:
            stats.unknown_events[name] += 1
        stats.events[name] += 1
        return Envelope(line_no, name, data)


class _Quiet:
    """A sink for errors already reported once."""

    def error(self, *args) -> None:
        pass


def read_one(data: bytes) -> Envelope | None:
    """The record in `data` (a file's bytes from one envelope's raw_start to its raw_end), read as
    the reader read it in its file, payload and all: the reader's state at an envelope line is the
    same whatever came before it (ingest/trace_ranges.py cuts a file there for the same reason)."""
    reader = EnvelopeReader(_Quiet())
    for env in reader.envelopes(io.BytesIO(data)):
        return env
    return reader.close()


def _is_text(raw: bytes) -> bool:
    """Mostly printable: a line of text that lacks the prefix, as opposed to binary garbage."""
    sample = raw[:256]
    bad = sum(1 for b in sample if b < 9 or 13 < b < 32 or b == 127)
    return bad * 10 < len(sample)
