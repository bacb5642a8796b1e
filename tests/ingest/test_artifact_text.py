"""The normalisation that `compilewatch diff` compares artifacts by and the ingest fingerprints them
by (ingest/formats/artifact_text.py) gives, on every graph, guard tree and output code of real
traces, exactly what its two rules say as regular expressions: ids of 7 digits or more, and numbered
generated names. The module applies them faster than `re.sub` of those patterns would; this holds
the two to each other."""
from __future__ import annotations

import gzip
import re
import tarfile
from pathlib import PurePath, Path

import pytest

from compilewatch.ingest.formats import artifact_text as at
from compilewatch.ingest.records import CountingSink
from compilewatch.ingest.trace.envelope import EnvelopeReader, TraceStats

REPO = Path(__file__).resolve().parents[2]
IDS = re.compile(r"(?<![\w.])\d{7,}(?![\w.])", re.A)
NAMES = re.compile(r"\b([A-Za-z_]\w*)_\d+\b", re.A)


def reference(text: str) -> str:
    text = IDS.sub("<id>", at._ADDRESS.sub("0x…", text))
    text = at._FILE_COMMENT.sub(lambda m: m.group(1) + PurePath(m.group(2)).name, text)
    text = at._KERNEL_PATH.sub(lambda m: m.group(1) + PurePath(m.group(2)).name, text)
    return NAMES.sub(r"\1_N", text)


def _payloads() -> list[tuple[str, str]]:
    blobs = [gzip.decompress(p.read_bytes()) for p in sorted((REPO / "tests" / "fixtures" / "trace").glob("*.log.gz"))]
    for archive in [*sorted((REPO / "sample_logs" / "gpu-h100-torch2.11-cudagraphs").glob("*_run1.tar.gz")),
                    *sorted((REPO / "tests" / "fixtures" / "graphs").glob("*.tar.gz"))]:
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and "/trace/" in m.name:
                    data = tf.extractfile(m).read()
                    blobs.append(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    out = []
    for data in blobs:
        reader = EnvelopeReader(CountingSink(), TraceStats())
        out += [(e.name, e.payload_bytes.decode("utf-8", "replace")) for e in reader.envelopes(data.splitlines(keepends=True))
                if e.name in at.PARTS and e.payload_bytes]
    return out


def test_the_rules_as_applied_are_the_rules_as_patterns():
    payloads = _payloads()
    assert len(payloads) > 50 and {k for k, _ in payloads} >= {"dynamo_output_graph", "aot_forward_graph",
                                                                 "inductor_output_code", "dynamo_cpp_guards_str"}
    for kind, text in payloads:
        assert at.normalise(text) == reference(text), kind


@pytest.mark.parametrize("text, want", [
    ("___check_obj_id(L['m'], 140400820326048)", "___check_obj_id(L['m'], <id>)"),
    ("x1400820326048 1400820326048.5 v.1400820326048 123456", "x1400820326048 1400820326048.5 v.1400820326048 123456"),
    ("h_1 linear_22 cpp_fused_relu_0 a_1_2 x__3 _1 9a_1 1_000 foo_1bar é_1 arg0_1",
     "h_N linear_N cpp_fused_relu_N a_1_N x__N _1 9a_1 1_000 foo_1bar é_1 arg0_N"),
    ("# File: /tmp/job/blocks_job.py:37 in forward, code: return x", "# File: blocks_job.py in forward, code: return x"),
    ("# kernel path: /tmp/cache-a/7l/c7le2k.py", "# kernel path: c7le2k.py"),
])
def test_what_is_made_alike(text, want):
    assert at.normalise(text) == reference(text) == want
