"""The TORCH_LOGS reader reads a file object in blocks (each decoded once and fed through the
assembler's many-lines path: RecordAssembler.feed_text, whose lines that it only skims are read by
the compiled _skim.skim, or feed_lines and _fresh, the same rules in Python where it is not
built), and any other iterable line by line
(RecordAssembler.feed): both must give the same rows, errors, line numbers and record count,
wherever the block edges fall. Checked on every real text log (the text
fixtures, every bundle's torch_logs.txt), with blocks small enough that each log crosses many of
them, and on each log damaged the ways copies damage it (CRLF lines, a NUL byte, bytes that are not
UTF-8, a cut last line)."""
from __future__ import annotations

import gzip
import io
import random
import tarfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compilewatch.ingest import text as text_reader
from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text, reader

REPO = Path(__file__).resolve().parents[3]
PUBLIC = (REPO / ".." / "shared" / "public_logs").resolve()


def _real_text_logs() -> list[tuple[str, bytes]]:
    logs = [(p.name, p.read_bytes()) for p in sorted((REPO / "tests" / "fixtures" / "text").glob("*.log"))]
    for archive in sorted(REPO.glob("sample_logs/**/*.tar.gz")) + sorted(REPO.glob("tests/fixtures/**/*.tar.gz")):
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith("torch_logs.txt"):
                    data = tf.extractfile(m).read()
                    logs.append((f"{archive.relative_to(REPO)}:{m.name}", data))
    if PUBLIC.is_dir():  # the public logs are traces today; any TORCH_LOGS text among them is checked too
        for p in sorted(PUBLIC.rglob("*")):
            data = p.read_bytes() if p.is_file() else b""
            data = gzip.decompress(data) if p.suffix == ".gz" else data
            if b"[__" in data and b'{"' not in data[:4096]:
                logs.append((p.name, data))
    return [(name, data) for name, data in logs if data.strip()]


LOGS = _real_text_logs()


def _damaged(data: bytes) -> bytes:
    lines = io.BytesIO(data).readlines()
    out = []
    for i, ln in enumerate(lines):
        if i % 53 == 3:
            ln = ln.replace(b"\n", b"\r\n")
        if i % 211 == 7:
            ln = ln[:5] + b"\x00" + ln[5:]
        if i % 307 == 11:
            ln = ln[:9] + b"\xff" + ln[9:]
        out.append(ln)
    return b"".join(out)[:-37]


def _everything(data: bytes, by_lines: bool):
    sink = CollectingSink()
    parse_text(iter(io.BytesIO(data).readlines()) if by_lines else io.BytesIO(data), sink)
    return {t: list(v) for t, v in sink.rows.items() if v}, sink.errors, sink.metadata


def test_there_are_many_real_text_logs():
    assert len(LOGS) >= 60


@pytest.mark.parametrize("loop", ["compiled", "python"])
@pytest.mark.parametrize("chunk", [97, 4096, 1 << 20])
def test_blocks_read_as_lines(chunk, loop, monkeypatch):
    monkeypatch.setattr(text_reader, "_CHUNK", chunk)
    if loop == "python":
        monkeypatch.setattr(reader, "skim", None)
    elif reader.skim is None:
        pytest.skip("the compiled loop is not built here (no C compiler at install)")
    rows = 0
    for name, data in LOGS:
        for variant in (data, _damaged(data)):
            by_blocks = _everything(variant, by_lines=False)
            assert by_blocks == _everything(variant, by_lines=True), name
            rows += sum(len(v) for v in by_blocks[0].values())
    assert rows > 1000   # the logs are real logs with records in them, not empty


# Lines built from the prefixes and messages the compiled loop must tell apart: the same prefix or
# one that differs in its last character, prefixes of records no parser wants from the same process
# and from another one (with and without a compile id, with an artifact whose records all start with
# a known line), a line that is only the prefix (with or without its space), a message that starts a
# record or only starts with a record start's first character, lines without a prefix (indented,
# a known continuation start, plain output, one with a prefix or its mark later in the line, empty)
# and text outside Latin-1 (the decoded block then holds 2- or 4-byte characters, the prefix 1).
_PREFIXES = ["V1127 10:00:00.000001 11 torch/_dynamo/guards.py:2590] [0/1] [__recompiles]",
             "V1127 10:00:00.000001 11 torch/_dynamo/guards.py:2590] [0/1] [__recompileS]",
             "V1127 10:00:00.000003 11 torch/_dynamo/guards.py:2591] [0/1] [__guards]",
             "I1127 10:00:00.000004 11 torch/_dynamo/convert_frame.py:9] [0/1]",
             "W1127 10:00:00.5 11 torch/_inductor/x.py:9]",
             "V1127 10:00:00.000005 13 torch/_dynamo/output_graph.py:1] [0/2] [__graph_code]",
             "V1127 10:00:00.000006 11 torch/_dynamo/output_graph.py:1] [__graph_breaks]",
             "V1127 10:00:00.000007 11 no_line_number.py] [0/1]",
             "[rank1]:V1127 10:00:00.000002 12 torch/_dynamo/symbolic_convert.py:1] [1/0] [__graph_breaks]",
             "[rank1]:[2023-11-06 14:54:45,922] [0/1] torch._dynamo.guards.__recompiles: [DEBUG]"]
_MESSAGES = ["Recompiling function forward in /m.py:10", "    triggered by the following guard failure(s):",
             "    - 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8",
             "Graph break in user code at /m.py:3", "Graph break: from user code at:", "R", "G", "",
             "    File \"/m.py\", line 3, in f — ünïcode", "  \u4e2d\u6587 \U0001F600 text", "Recompiling",
             "GUARDS:", "Traceback (most recent call last):", "plain program output", "step 3 loss 0.25",
             "x torch._dynamo noise", "out] [__recompiles] x", "\tTAB indented", "- 0/0: listed",
             "V1127 10:00:00.000009 11 torch/_dynamo/guards.py:1] [0/3] [__guards] in the middle"]


def _record_fields(lines: list[str]):
    return _everything("\n".join(lines).encode(), by_lines=False)


def _assembled(lines: list[str]):
    """Every record the assembler hands on, field by field, its errors and its record count: what a
    parser would get, whether or not the parsers' rows show it (every record start is wanted)."""
    got, errors = [], []
    asm = reader.RecordAssembler(lambda first_line: "wanted", got.append, lambda *err: errors.append(err))
    asm.feed_text(1, "\n".join(lines))
    asm.close()
    fields = [tuple(getattr(r, f) for f in reader.Record.__slots__) for r in got]
    return fields, errors, asm.records


def _both_loops(lines: list[str]):
    """The rows, errors and assembled records of `lines` read by the compiled loop, then by the
    Python one (a hypothesis test cannot take pytest's monkeypatch)."""
    compiled = _record_fields(lines), _assembled(lines)
    saved = reader.skim
    try:
        reader.skim = None
        return compiled, (_record_fields(lines), _assembled(lines))
    finally:
        reader.skim = saved


@pytest.mark.skipif(reader.skim is None, reason="the compiled loop is not built here")
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(["", " "]), st.sampled_from(_MESSAGES)).map("".join),
    st.sampled_from(_MESSAGES)), max_size=40))
# a kept record, then program output (no unprefixed line continues it after that), then an empty line
@example([_PREFIXES[0] + " Recompiling function forward in /m.py:10", "plain program output", "", "    x"])
@example(["Recompiling function forward in /m.py:10", "step 3 loss 0.25", "", "\tTAB indented"])
def test_compiled_loop_reads_as_the_python_loop(lines):
    compiled, python = _both_loops(lines)
    assert compiled == python


# What a copy or a hand edit does to a real log's lines: a line repeated, dropped, moved, cut short,
# emptied or inserted, a character put in or replaced (prefix punctuation, a digit, text outside
# Latin-1, a rank), a pid or an artifact name changed.
_EDITS = ["", " ", "]", "[", ":", "0", "é", "\u4e2d", "_", "\t", "V", "[rank0]:"]


def _mutated(lines: list[str], rng: random.Random) -> list[str]:
    if len(lines) > 300:
        start = rng.randrange(len(lines) - 300)
        lines = lines[start:start + rng.randrange(20, 300)]
    lines = list(lines)
    for _ in range(rng.randrange(1, 8)):
        if not lines:
            break
        i, op = rng.randrange(len(lines)), rng.randrange(7)
        if op == 0:
            lines.insert(i, rng.choice(lines))
        elif op == 1:
            del lines[i]
        elif op == 2:
            k = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:k] + rng.choice(_EDITS) + lines[i][k + 1:]
        elif op == 3:
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)]
        elif op == 4:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 5:
            lines.insert(i, "")
        else:
            lines[i] = lines[i].replace(" 1", " 2", 1) if rng.random() < 0.5 else lines[i].replace("__", "_", 1)
    return lines


@pytest.mark.skipif(reader.skim is None, reason="the compiled loop is not built here")
def test_compiled_loop_reads_edited_real_logs_as_the_python_loop():
    rng = random.Random(20261128)
    logs = [data.decode("utf-8", "replace").replace("\r", "").replace("\x00", "").split("\n") for _, data in LOGS]
    for _ in range(2000):
        lines = _mutated(rng.choice(logs), rng)
        compiled, python = _both_loops(lines)
        assert compiled == python, "\n".join(lines)


@pytest.mark.parametrize("loop", ["compiled", "python"])
def test_a_line_with_the_records_prefix_lets_unprefixed_lines_continue_it_again(loop, monkeypatch):
    """Program output between a record's lines stops unprefixed lines from continuing the record,
    until a line with the record's prefix: then they may again, read line by line or in blocks."""
    if loop == "python":
        monkeypatch.setattr(reader, "skim", None)
    elif reader.skim is None:
        pytest.skip("the compiled loop is not built here (no C compiler at install)")
    prefix = _PREFIXES[0]
    lines = [f"{prefix} Recompiling function forward in /m.py:10", "step 3 loss 0.25",
             "    - 0/9: output, not the record's", f"{prefix}     triggered by the following guard failure(s):",
             "    - 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"]
    by_lines, blocks = _everything("\n".join(lines).encode(), by_lines=True), _record_fields(lines)
    assert blocks == by_lines
    assert [r[-3] for r in _assembled(lines)[0]] == [[lines[0][len(prefix) + 1:], lines[3][len(prefix) + 1:], lines[4]]]


def test_compiled_loop_cuts_long_records_as_the_python_loop(monkeypatch):
    prefix = _PREFIXES[0]
    lines = [f"{prefix} Recompiling function forward in /m.py:10",
             f"{prefix}     triggered by the following guard failure(s):"]
    lines += [f"{prefix}     - 0/{i}: tensor 'x' size mismatch at index 0. expected 4, actual 8" for i in range(40)]
    # the same record without prefixes (torch 2.0), its lines continued as unprefixed lines
    bare = [line[len(prefix) + 1:] for line in lines] + [""] * 3 + ["    - 0/40: after the empty lines"]
    monkeypatch.setattr(reader, "MAX_RECORD_LINES", 9)
    for log in (lines, bare):
        compiled, python = _both_loops(log)
        assert compiled == python
        assert any(e["kind"] == "truncated" for e in python[0][1])
        assert [len(r[-3]) for r in python[1][0]] == [9]


def test_the_compiled_loop_is_built_where_a_compiler_is(c_compiler):
    """An install with a C compiler at hand builds the loop (setup.py's extension is optional, so a
    failed build would otherwise go unnoticed and the reader quietly run slower)."""
    if not c_compiler:
        pytest.skip("no C compiler or Python headers on this machine: the Python loop is what runs")
    assert reader.skim is not None, "run scripts/setup.sh again: the install did not build _skim"
