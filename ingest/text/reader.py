"""Lines -> log records for TORCH_LOGS text, every prefix format since torch 2.0.

A *record* is one Python logging call: its message may span many lines, and torch's formatter
repeats the same prefix on each of them (2.1+). Lines from several processes or ranks can
interleave, so one record is kept open per (rank, pid) and a line continues it when it carries
the identical prefix and does not itself start a new record. Prefixes understood:

- glog (2.2+):  ``[rank0]:V0703 10:34:13.273000 1403 torch/_dynamo/guards.py:2590] [0/1] [__recompiles] msg``
- old (2.0/2.1): ``[rank3]:[2023-11-06 14:54:45,922] [0/1] torch._dynamo.guards.__recompiles: [DEBUG] msg``
- torchrun's ``--tee`` prefix ``[default3]:`` in front of either.
Lines without a prefix continue the record just before them when they look like a
continuation (indented, a traceback, a known section header): 2.0 printed some multi-line
warnings that way, and TORCH_LOGS_FORMAT can drop the prefix altogether.
"""
from __future__ import annotations

import calendar
import re

from compilewatch.ingest.formats import cudagraphs, glog, recompile_limit

try:  # the hot loop compiled (_skim.c); where it was not built, feed_lines and _fresh do the same
    from compilewatch.ingest.text._skim import skim
except ImportError:  # pragma: no cover - a build without a C compiler
    skim = None

_GLOG = re.compile(glog.CORE + r"(?: \[(?P<cid>!?\d+/\d+(?:/\d+)?(?:_\d+)?)\])?(?: \[(?P<art>__\w+)\])?(?: |$)")
_OLD = re.compile(
    r"\[(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d),(?P<ms>\d{3})\]"
    r"(?: \[(?P<cid>!?\d+/\d+(?:/\d+)?(?:_\d+)?)\])? (?P<logger>[\w.]+): \[(?P<level>[A-Z]+)\](?: |$)")
# a glog prefix shortened by hand when pasted into an issue: "...", then path:line] as glog prints it
_SHORT = re.compile(
    r"(?:\.\.\.|\u2026)(?P<path>[^\]\s]*?):(?P<lineno>\d+)\]"
    r"(?: \[(?P<cid>!?\d+/\d+(?:/\d+)?(?:_\d+)?)\])?(?: \[(?P<art>__\w+)\])?(?: |$)")
# standalone TorchDynamo (2022, before torch 2.0): logger and level, no time
_NOTIME = re.compile(r"(?P<logger>[Tt]orch(?:dynamo|inductor)[\w.]*): \[(?P<level>[A-Z]+)\](?: |$)")
_RANK = re.compile(r"\[(?:rank|default)(?P<rank>\d+)\]:")
# something that starts like a prefix but did not parse: a cut or mangled log line
# a prefix that starts mid-line: stdout without a newline, then a stderr log line (2.0 benchmarks)
_MIDLINE = re.compile(r"(?:\[(?:rank|default)\d+\]:)?(?:[" + glog.LEVEL_LETTERS + r"]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ |\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] )")
_PREFIXISH = re.compile(r"(?:\[(?:rank|default)\d+\]:)?(?:[" + glog.LEVEL_LETTERS + r"]\d{4} \d\d:\d\d|\[\d{4}-\d\d-\d\d \d\d:)")

RECORD_STARTS = (
    "Graph break: ",
    "Graph break in user code at ",
    "Graph break (",
    "Recompiling function",
    "('Recompiling function",
    *recompile_limit.TEXT_STARTS,
    *cudagraphs.TEXT_STARTS,
)
_START_FIRST_CHARS = "".join(sorted({p[0] for p in RECORD_STARTS}))
# unprefixed lines that still belong to the record before them
_CONTINUATION_STARTS = (
    " ", "\t", "Traceback", "torch._dynamo.exc.", "torch.", "Graph Break Reason", "Reason:",
    "User code traceback", "Stack variable source attribution", "The graph break occurred",
    "torch.compile will skip", "*** While handling", "triggered by", "To log all", "To diagnose",
    "to diagnose", "- ", "guard ", "from user code", "Set TORCH_LOGS", "During handling",
    "The above exception",
)
# what a prefix can start with: a rank, a glog level, a shortened path ("..."), TorchDynamo's logger
_PREFIX_FIRST_CHARS = "[" + glog.LEVEL_LETTERS + ".\u2026Tt"
BARE_KEY = ("bare",)      # the open record of lines without a prefix, beside the (rank, pid) keys
MAX_RECORD_LINES = 20000  # a bound on memory per open record; longer records are cut and counted
# every record these artifacts log starts with a known first line: their lines without that start
# are the tail of a record whose start is not in the file (a cut log, a split file)
_ARTS_WITH_KNOWN_STARTS = ("graph_breaks", "recompiles", "recompiles_verbose")
# unprefixed lines holding one of these may carry a prefix mid-line (see _MIDLINE)
_MIDLINE_MARKS = ("dynamo", "] [__")
# What the compiled loop (_skim.c) is told about the format, in skim's order: it knows nothing else
_SKIM_RULES = (_START_FIRST_CHARS, RECORD_STARTS, _CONTINUATION_STARTS, _PREFIX_FIRST_CHARS,
               glog.LEVEL_LETTERS, _GLOG.match, _ARTS_WITH_KNOWN_STARTS, _MIDLINE_MARKS)



def _glog_head(s: str, g: re.Match, rank: int | None) -> tuple:
    """RecordAssembler._parse_prefix's answer for a line whose glog prefix `g` matched."""
    end = g.end()
    level, md, hms, us, pid, _, _, cid, art = g.groups()
    # the prefix ends with "]"; the match, with the one space after it when there is one
    return (s[:end - 1] if s[end - 1] == " " else s[:end], rank, int(pid), cid, art[2:] if art else None,
            level, ("glog", md, hms, us), s[end:])


def _other_head(s: str, pos: int, rank: int | None) -> tuple | None:
    """The same for the prefixes other than glog's, at `pos` (after any rank)."""
    o = _OLD.match(s, pos)
    if o is not None:
        end = o.end()
        date, hms, ms, cid, logger, level = o.groups()
        art = logger.rsplit(".__", 1)[1] if ".__" in logger else None
        return (s[:end].rstrip(" "), rank, None, cid, art, level, ("old", date, hms, ms), s[end:])
    m = _SHORT.match(s, pos) or _NOTIME.match(s, pos)
    if m is not None:  # everything after the prefix is intact; the time is unknown
        end = m.end()
        groups = m.groupdict()
        art = groups.get("art")
        logger = groups.get("logger") or ""
        if art is None and ".__" in logger:
            art = "__" + logger.rsplit(".__", 1)[1]
        return (s[:end].rstrip(" "), rank, None, groups.get("cid"), art[2:] if art else None,
                groups.get("level"), ("none",), s[end:])
    return None


class Record:
    """One log record: its prefix fields and the message text of each of its lines."""

    __slots__ = ("start_line", "prefix", "rank", "pid", "compile_id", "artifact", "level", "ts",
                 "parser", "lines", "line_nos", "cut")

    def __init__(self, start_line, prefix, rank, pid, compile_id, artifact, level, ts, parser):
        self.start_line = start_line   # line number of the first line
        self.prefix = prefix           # the exact prefix text repeated on every line, None when bare
        self.rank = rank
        self.pid = pid
        self.compile_id = compile_id
        self.artifact = artifact       # "recompiles", "graph_breaks", ... (without "__"), or None
        self.level = level
        self.ts = ts
        self.parser = parser           # the parser for this record, or None: its lines are only skipped
        self.lines = []                # message text of each line
        self.line_nos = []
        self.cut = False


def glog_epoch(md: str, hms: str, us: str) -> float | None:
    return glog.epoch(md, hms, us)


def old_epoch(date: str, hms: str, ms: str) -> float | None:
    try:
        y, mo, d = int(date[:4]), int(date[5:7]), int(date[8:10])
        return calendar.timegm((y, mo, d, int(hms[:2]), int(hms[3:5]), int(hms[6:8]), 0, 0, 0)) + int(ms) / 1e3
    except (ValueError, OverflowError):
        return None


def starts_record(s: str) -> bool:
    """A line with a prefix whose message starts a log record: where a file can be cut into ranges
    that each parse on their own (see ingest/text_ranges.py)."""
    head = RecordAssembler._parse_prefix(s)
    return head is not None and head[-1].startswith(RECORD_STARTS)


class RecordAssembler:
    """Feed decoded lines; completed records go to ``on_record(record)``; lines that look like a
    prefixed log line but cannot be read go to ``on_error(line_no, kind, message, excerpt)``."""

    def __init__(self, wanted, on_record, on_error):
        self._wanted = wanted            # first line -> the parser for it, or None
        self._on_record = on_record
        self._on_error = self.on_error = on_error
        self._open: dict = {}            # (rank, pid) -> Record
        self._last: Record | None = None  # the record the previous line went to
        self._last_prefix: str | None = None
        self._bare_ok = False            # may an unprefixed line continue self._last?
        self.records = 0                 # log records seen, kept or not: is this a log at all?

    # -- many lines: the hot path. A line that carries the same prefix as the line before it and
    # does not start a record is a continuation; that is most lines of a TORCH_LOGS capture.
    def feed_lines(self, line_no: int, lines) -> int:
        starts = RECORD_STARTS
        firsts = _START_FIRST_CHARS
        feed = self._fresh
        lp = self._last_prefix
        plen = len(lp) + 1 if lp is not None else 0
        rec = self._last
        add_line = add_no = None
        room = 0
        if rec is not None and rec.parser is not None and not rec.cut:
            add_line, add_no = rec.lines.append, rec.line_nos.append
            room = MAX_RECORD_LINES - len(rec.lines)
        continued = False   # since the last fresh line: then unprefixed lines may continue it (as in feed)
        for s in lines:
            # same prefix, and not the first line of a new record (cheap first-char test first);
            # the prefix is always followed by one space or the end of the line
            if lp is not None and s.startswith(lp) and (
                    s[plen:plen + 1] not in firsts or not s.startswith(starts, plen)):
                if add_line is not None:
                    add_line(s[plen:])
                    add_no(line_no)
                    room -= 1
                    if room <= 0:
                        rec.cut = True
                        add_line = add_no = None
                line_no += 1
                continued = True
                continue
            if continued:
                self._bare_ok = True
            feed(line_no, s)
            line_no += 1
            lp = self._last_prefix
            plen = len(lp) + 1 if lp is not None else 0
            rec = self._last
            if rec is not None and rec.parser is not None and not rec.cut:
                add_line, add_no = rec.lines.append, rec.line_nos.append
                room = MAX_RECORD_LINES - len(rec.lines)
            else:
                add_line = add_no = None
            continued = False
        if continued:
            self._bare_ok = True
        return line_no

    def feed_text(self, line_no: int, text: str) -> int:
        """Feed the lines of `text` (whole lines, the last one's newline optional, "\r\n" endings
        read as "\n"); returns the number the next line would have. The lines the assembler only
        skims (continuations, starts of records no parser wants, unprefixed lines) are read by
        _skim.skim, so that only the lines a record keeps become strings; where it is not built,
        or lines end in "\r\n", the text is split and feed_lines runs the same loop."""
        crlf = "\r" in text
        if skim is None or crlf:
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            if crlf:
                lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
            return self.feed_lines(line_no, lines)
        rules, max_lines = _SKIM_RULES, MAX_RECORD_LINES
        fresh = self._fresh
        find = text.find
        pos = 0
        end = len(text)
        while pos < end:
            pos, line_no = skim(self, text, pos, end, line_no, max_lines, rules)
            if pos >= end:
                break
            eol = find("\n", pos)
            if eol < 0:
                eol = end
            fresh(line_no, text[pos:eol])
            line_no += 1
            pos = eol + 1
        return line_no

    # -- one line
    def feed(self, line_no: int, s: str) -> None:
        lp = self._last_prefix
        if lp is not None and s.startswith(lp):
            msg = s[len(lp):]
            if msg.startswith(" "):
                msg = msg[1:]
            if not msg.startswith(RECORD_STARTS):
                rec = self._last
                if rec.parser is not None:
                    self._add(rec, line_no, msg)
                self._bare_ok = True
                return
        self._fresh(line_no, s)

    def _fresh(self, line_no: int, s: str) -> None:
        """A line that does not continue the record of the line before it (feed_lines has checked)."""
        if not s:
            if self._bare_ok and self._last is not None and self._last.parser is not None:
                self._add(self._last, line_no, "")
            return
        if s[0] in _PREFIX_FIRST_CHARS:
            # A line without a rank, most lines of most logs, is matched here, not through
            # _parse_prefix's rank checks and call (5% of a text parse)
            if s[0] != "[":
                g = _GLOG.match(s)
                head = _glog_head(s, g, None) if g is not None else _other_head(s, 0, None)
            else:
                head = self._parse_prefix(s)
            if head is not None:
                self._prefixed(line_no, s, *head)
                return
            if _PREFIXISH.match(s):
                self._on_error(line_no, "glog", "line starts like a log prefix that cannot be read", s)
                self._bare_ok = False
                return
        if _MIDLINE_MARKS[0] in s or _MIDLINE_MARKS[1] in s:
            m = _MIDLINE.search(s, 1)
            if m:
                head = self._parse_prefix(s[m.start():])
                if head is not None:
                    self._prefixed(line_no, s[m.start():], *head)
                    return
        self._unprefixed(line_no, s)

    @staticmethod
    def _parse_prefix(s: str):
        rank = None
        pos = 0
        if s[:1] == "[" and (s.startswith("[rank") or s.startswith("[default")):
            m = _RANK.match(s)
            while m:  # "[rank0]:" and/or "[default0]:"
                rank = int(m.group("rank"))
                pos = m.end()
                m = _RANK.match(s, pos)
        g = _GLOG.match(s, pos)
        return _glog_head(s, g, rank) if g is not None else _other_head(s, pos, rank)

    def _prefixed(self, line_no, s, prefix, rank, pid, cid, art, level, tsraw, msg):
        key = (rank, pid)
        rec = self._open.get(key)
        if rec is not None and rec.prefix == prefix and not msg.startswith(RECORD_STARTS):
            if rec.parser is not None:
                self._add(rec, line_no, msg)
        else:
            if rec is not None and rec.parser is not None:   # (one no parser wants just ends)
                self._finish(rec)
            keep = self._wanted(msg) if msg.startswith(RECORD_STARTS) else None
            ts = None
            if keep is not None:
                if tsraw[0] == "glog":
                    ts = glog_epoch(tsraw[1], tsraw[2], tsraw[3])
                elif tsraw[0] == "old":
                    ts = old_epoch(tsraw[1], tsraw[2], tsraw[3])
            rec = Record(line_no, prefix, rank, pid, cid, art, level, ts, keep)
            self.records += 1
            if keep is not None:
                self._add(rec, line_no, msg)
            elif art in _ARTS_WITH_KNOWN_STARTS and msg.strip():
                self._on_error(line_no, "truncated",
                               f"[__{art}] lines whose record start is missing", s)
            self._open[key] = rec
        self._last = rec
        self._last_prefix = prefix
        self._bare_ok = True

    def _unprefixed(self, line_no, s):
        rec = self._last
        if self._bare_ok and rec is not None and s.startswith(_CONTINUATION_STARTS) \
                and not s.startswith(RECORD_STARTS):
            if rec.parser is not None:
                self._add(rec, line_no, s)
            return
        parser = self._wanted(s) if s.startswith(RECORD_STARTS) else None
        if parser is not None:
            key = BARE_KEY
            old = self._open.get(key)
            if old is not None:
                self._finish(old)
            rec = Record(line_no, None, None, None, None, None, None, None, parser)
            self.records += 1
            self._add(rec, line_no, s)
            self._open[key] = rec
            self._last = rec
            self._last_prefix = None
            self._bare_ok = True
            return
        # plain program output: ends any unprefixed continuation
        self._bare_ok = False

    def _add(self, rec: Record, line_no: int, msg: str) -> None:
        if rec.cut:
            return
        rec.lines.append(msg)
        rec.line_nos.append(line_no)
        if len(rec.lines) >= MAX_RECORD_LINES:
            rec.cut = True

    def finish(self, rec: Record) -> None:
        """Hand `rec` to its parser now: a record a range of the file left open (ingest/text_ranges.py)."""
        self._finish(rec)

    def _finish(self, rec: Record) -> None:
        if rec.parser is not None:
            if rec.cut:
                self._on_error(rec.start_line, "truncated",
                               f"record longer than {MAX_RECORD_LINES} lines; the rest was skipped",
                               rec.lines[0] if rec.lines else "")
            self._on_record(rec)
        if self._last is rec:
            self._last = None
            self._last_prefix = None

    def close(self) -> None:
        for rec in sorted(self._open.values(), key=lambda r: r.start_line):
            self._finish(rec)
        self._open.clear()
