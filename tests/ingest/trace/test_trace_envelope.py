"""The envelope reader's contracts: the md5 as torch computes it, compile-id strings as tlparse prints
them, and a file object reading like a plain list of lines on every real log."""
from __future__ import annotations

import hashlib
import io

import pytest
from trace_support import PUBLIC, fixture_logs, parse_bytes, read_back, read_log, summary

from compilewatch.ingest.trace.envelope import format_compile_id


def _torch_record(metadata_json: str, payload: str) -> bytes:
    # what TorchLogsFormatter (torch/_logging/_internal.py) writes for trace_structured: md5 of the
    # payload string, then each payload line prefixed with "\n\t"
    md5 = hashlib.md5(payload.encode()).hexdigest()
    env = metadata_json[:-1] + f', "has_payload": "{md5}"}}'
    text = f"V1122 01:49:58.265000 7860 torch/_dynamo/guards.py:5400] {env}"
    text += "".join(f"\n\t{ln}" for ln in payload.split("\n"))
    return (text + "\n").encode()


@pytest.mark.parametrize("payload", ["x", "", "a\nb", "a\n", "\n\n", "\ttabbed\n\t\tline", "ünï\ncödé"])
def test_md5_is_over_the_payload_lines_without_their_tab(payload):
    rec = _torch_record('{"artifact": {"name": "recompile_reasons", "encoding": "string"}, "frame_id": 0, '
                        '"frame_compile_id": 1, "attempt": 0}', payload)
    sink = parse_bytes(rec)
    assert sink.errors == []
    assert sink.metadata["trace_stats"]["payloads"] == 1


def test_compile_id_strings():
    assert format_compile_id(None, 0, 0, 0) == "0/0"
    assert format_compile_id(None, 0, 1, None) == "0/1"
    assert format_compile_id(None, 2, 0, 1) == "2/0_1"
    assert format_compile_id(3, 0, 1, 2) == "!3/0/1_2"
    assert format_compile_id(1, None, None, None) == "!1/-/-"
    assert format_compile_id(None, None, None, None) is None


def _all_logs():
    logs = [p for p in fixture_logs()]
    if PUBLIC.is_dir():
        logs += sorted(PUBLIC.glob("*.log"))
    return logs


@pytest.mark.parametrize("path", _all_logs(), ids=lambda p: p.name)
def test_file_object_equals_list_of_lines(path):
    data = read_log(path)
    a, b = parse_bytes(data), parse_bytes(data, by_lines=True)
    assert read_back(a.rows) == read_back(b.rows) and a.errors == b.errors
    assert a.metadata == b.metadata
