"""Bad input, derived at test time from a real trace (tests/fixtures/trace/recompile_limit.log.gz):
each damage is counted with its kind and line, and every undamaged record still lands."""
from __future__ import annotations

from collections import Counter

import pytest
from trace_support import FIXTURES, parse_bytes, read_log, split_lines, summary

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.trace import parse_trace

LOG = read_log(FIXTURES / "recompile_limit.log.gz")
GOOD = parse_bytes(LOG)
LINES = split_lines(LOG)
ENV2 = [i for i, ln in enumerate(LINES) if ln.startswith(b"V")][1]  # index of the second envelope line


def kinds(sink):
    return Counter(e["kind"] for e in sink.errors)


def rows(sink):
    return {t: len(v) for t, v in sink.rows.items()}


def test_clean_reference():
    assert GOOD.errors == [] and rows(GOOD)["compiles"] == 3


def test_empty_file():
    sink = parse_bytes(b"")
    assert sink.errors == [] and not any(sink.rows.values())
    assert sink.metadata["trace_stats"]["lines"] == 0


def test_only_blank_lines():
    sink = parse_bytes(b"\n\r\n\n")
    assert sink.errors == [] and not any(sink.rows.values())


def test_truncated_inside_last_payload():
    # cut in the middle of the last payload's last line, as a killed process leaves it
    cut = LOG[:-30]
    assert not cut.endswith(b"\n") and cut.rsplit(b"\n", 1)[1].startswith(b"\t")
    sink = parse_bytes(cut)
    assert kinds(sink) == {"truncated": 1}
    (err,) = sink.errors
    assert LINES[err["line_no"] - 1].startswith(b"V")  # points at the envelope of the cut record
    # the cut record is the chromium "E" that closes the last "dynamo" span: only that phase is lost
    expect = rows(GOOD)
    expect["compile_phases"] -= 1
    assert rows(sink) == expect


def test_truncated_inside_envelope_line():
    last_env = max(i for i, ln in enumerate(LINES) if ln.startswith(b"V"))
    cut = b"".join(LINES[:last_env]) + LINES[last_env][:80]
    sink = parse_bytes(cut)
    assert kinds(sink) == {"truncated": 1}
    assert sink.errors[0]["line_no"] == last_env + 1


def test_truncated_at_a_line_boundary_inside_a_payload():
    # payload lines missing but the file ends on a newline: md5 mismatch, reported on the envelope
    last_env = max(i for i, ln in enumerate(LINES) if ln.startswith(b"V"))
    sink = parse_bytes(b"".join(LINES[: last_env + 3]))
    assert kinds(sink) == {"payload_md5": 1}
    assert sink.errors[0]["line_no"] == last_env + 1


def test_crlf_reads_like_lf():
    sink = parse_bytes(LOG.replace(b"\n", b"\r\n"))
    assert sink.errors == []
    assert summary(sink) == summary(GOOD)


def test_no_newline_at_end():
    sink = parse_bytes(LOG.rstrip(b"\n"))
    assert sink.errors == [] and summary(sink) == summary(GOOD)


def test_non_utf8_in_envelope_is_decoded_with_replacement():
    i = next(i for i, ln in enumerate(LINES) if b'"compilation_metrics"' in ln)
    bad = list(LINES)
    bad[i] = bad[i].replace(b'"co_name": "k"', b'"co_name": "k\xff\xfe"')
    sink = parse_bytes(b"".join(bad))
    assert kinds(sink) == {"encoding": 1} and sink.errors[0]["line_no"] == i + 1
    assert rows(sink) == rows(GOOD)
    assert sink.rows["compiles"][0]["co_name"] == "k\ufffd\ufffd"


def test_non_utf8_in_payload_fails_md5_but_keeps_the_record():
    i = next(i for i, ln in enumerate(LINES) if b'"recompile_reasons"' in ln)
    bad = list(LINES)
    bad[i + 1] = bad[i + 1].replace(b"mode", b"m\xffde", 1)
    sink = parse_bytes(b"".join(bad))
    assert kinds(sink) == {"payload_md5": 1} and sink.errors[0]["line_no"] == i + 1
    assert rows(sink) == rows(GOOD)
    assert "\ufffd" in sink.rows["guard_failures"][0]["raw"]


def test_nul_garbage():
    # a crashed writer can leave a run of NULs where a block was never written
    i = len(LINES) // 2
    while not LINES[i].startswith(b"V"):
        i += 1
    bad = b"".join(LINES[:i]) + b"\x00" * 4096 + b"\n" + b"".join(LINES[i:])
    sink = parse_bytes(bad)
    assert kinds(sink) == {"binary": 1} and sink.errors[0]["line_no"] == i + 1
    assert summary(sink)["rows"] == summary(GOOD)["rows"]
    # NULs glued in front of an envelope: counted, and the envelope after them is still read
    glued = b"".join(LINES[:i]) + b"\x00" * 100 + b"".join(LINES[i:])
    sink = parse_bytes(glued)
    assert kinds(sink) == {"binary": 1}
    assert summary(sink)["rows"] == summary(GOOD)["rows"]


def test_random_binary_block():
    import random

    rnd = random.Random(7)
    junk = bytes(rnd.randrange(256) for _ in range(3000)).replace(b"\n", b"")
    i = 40
    bad = b"".join(LINES[:i]) + junk + b"\n" + b"".join(LINES[i:])
    sink = parse_bytes(bad)
    assert sum(kinds(sink).values()) >= 1
    assert set(kinds(sink)) <= {"binary", "glog", "payload", "payload_md5"}
    assert rows(sink)["compiles"] == 3 and rows(sink)["guard_failures"] == 3


def test_corrupted_envelope_json():
    i = next(i for i, ln in enumerate(LINES) if b'"compilation_metrics"' in ln)
    bad = list(LINES)
    bad[i] = bad[i][:200] + b"\n"
    sink = parse_bytes(b"".join(bad))
    assert kinds(sink) == {"json": 1} and sink.errors[0]["line_no"] == i + 1
    # the compile whose metrics were lost still has a row, from its dynamo_start
    assert rows(sink)["compiles"] == 3
    assert sum(1 for c in sink.rows["compiles"] if c.get("metrics_json") is None) == 1


def test_line_without_glog_prefix_and_stray_payload():
    bad = LINES[:ENV2] + [b"hello from print()\n", b"\tstray payload 1\n", b"\tstray payload 2\n"] + LINES[ENV2:]
    sink = parse_bytes(b"".join(bad))
    assert kinds(sink) == {"glog": 1, "payload": 1}
    assert [e["line_no"] for e in sink.errors] == [ENV2 + 1, ENV2 + 2]
    assert summary(sink)["rows"] == summary(GOOD)["rows"]


def test_bad_md5_field_and_unknown_keys_are_counted():
    extra = (b'V1122 01:49:58.266000 7860 torch/x.py:1] {"future_event": {"a": 1}, "frame_id": 0, '
             b'"new_context_key": 3, "has_payload": "zz"}\n\tpayload\n')
    sink = parse_bytes(b"".join(LINES[:ENV2]) + extra + b"".join(LINES[ENV2:]))
    assert kinds(sink) == {"payload_md5": 1}
    assert sink.metadata["trace_unknown_keys"] == {"future_event": 1, "new_context_key": 1}
    assert summary(sink)["rows"] == summary(GOOD)["rows"]


def test_warning_and_info_levels_and_windows_paths():
    env = (b'W0703 10:34:13.273000 1403 C:\\Users\\me\\torch\\_dynamo\\utils.py:12] '
           b'{"artifact": {"name": "torch_version", "encoding": "json"}, "has_payload": "%s"}\n')
    import hashlib

    payload = b'{\n"pytorch_version": "2.5.1"\n}'
    data = env % hashlib.md5(payload).hexdigest().encode() + b"".join(b"\t" + ln + b"\n" for ln in payload.split(b"\n"))
    sink = CollectingSink()
    parse_trace(iter(split_lines(data)), sink)
    assert sink.errors == [] and sink.metadata["torch_version"] == "2.5.1"


@pytest.mark.parametrize("by_lines", [False, True])
def test_stream_kinds(by_lines):
    """A file object and a plain iterable of lines read the same."""
    assert summary(parse_bytes(LOG, by_lines=by_lines)) == summary(GOOD)


@pytest.mark.parametrize("name", ["recompile_limit.log.gz", "graph_break_recompile.log.gz"])
def test_two_sessions_in_one_file_count_twice(name):
    """Two runs appended to one file reuse compile ids (as tlparse's cache_hit_miss.log does): every
    recompile, guard failure and graph break of the second run counts again, none is merged away."""
    log = read_log(FIXTURES / name)
    once, twice = parse_bytes(log), parse_bytes(log + log)
    assert twice.errors == []
    assert {t: len(v) for t, v in twice.rows.items()} == {t: 2 * len(v) for t, v in once.rows.items()}
    nos = [r["recompile_no"] for r in twice.rows["recompiles"]]
    assert nos == list(range(1, len(nos) + 1))
    assert sorted({g["recompile_no"] for g in twice.rows["guard_failures"]}) == nos


def test_recompile_cut_off_before_its_metrics_still_counts():
    """A log that ends after the recompile's dynamo_start (the process died mid-compile)."""
    k = next(i for i, ln in enumerate(LINES) if b'{"dynamo_start"' in ln and b'"frame_compile_id": 1' in ln)
    sink = parse_bytes(b"".join(LINES[: k + 1]))
    assert sink.errors == []
    (r,) = sink.rows["recompiles"]
    assert (r["compile_id"], r["function"], r["recompile_no"]) == ("0/1", "k", 1)
    assert r["reason"].startswith("0/0: mode == 'a'")
    assert [g["recompile_no"] for g in sink.rows["guard_failures"]] == [1]
