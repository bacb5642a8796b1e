"""Shared by the trace tests and regen_goldens: where the logs are, and a summary of what a parse
produced that is small enough to keep as a golden file and specific enough to catch a regression."""
from __future__ import annotations

import base64
import gzip
import io
import zlib
from collections import Counter
from pathlib import Path

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.trace import TraceParser

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "trace"
GOLDENS = Path(__file__).resolve().parent / "goldens"
# the public tlparse test logs are read in place, never copied into the repo
PUBLIC = (REPO / ".." / "shared" / "public_logs" / "tlparse").resolve()


def fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.name.endswith((".log", ".log.gz")))


def read_back(rows: dict) -> dict:
    """A sink's rows, every table's in order, each artifact's payload decompressed: what two parses
    must agree on. Deflate may encode one payload in other bytes from one run to another (a threaded
    parse of graph_break_recompile.log.gz once gave 4 of its 42 artifacts other bytes than the inline
    parse before it, each the same payload decompressed; tests/ingest/stored_tables.read_back)."""
    return {t: [{**r, "payload_z": zlib.decompress(base64.b64decode(r["payload_z"]))} if r.get("payload_z") else r
                for r in table_rows] for t, table_rows in rows.items()}


def read_log(path: Path) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def parse_bytes(data: bytes, *, by_lines: bool = False) -> CollectingSink:
    """Parse as the loader does (a binary file object); by_lines feeds a plain list of lines instead."""
    sink = CollectingSink()
    p = TraceParser(sink)
    p.feed(split_lines(data) if by_lines else io.BytesIO(data))
    p.close()
    return sink


def split_lines(data: bytes) -> list[bytes]:
    """Lines as iterating a binary file gives them: split on b"\\n" only (bytes.splitlines also
    splits on \\r and friends)."""
    return list(io.BytesIO(data))


def parse_path(path: Path) -> CollectingSink:
    return parse_bytes(read_log(path))


def summary(sink: CollectingSink) -> dict:
    rows = sink.rows
    compiles = rows.get("compiles", [])
    return {
        "torch_version": sink.metadata.get("torch_version"),
        "rows": {t: len(v) for t, v in sorted(rows.items())},
        "errors": dict(sorted(Counter(e["kind"] for e in sink.errors).items())),
        "compile_ids": [r["compile_id"] for r in compiles],
        "fail_types": dict(sorted(Counter(r["fail_type"] for r in compiles if r.get("fail_type")).items())),
        "recompiles": [[r["compile_id"], r["function"], r["reason"] and r["reason"][:120]]
                       for r in rows.get("recompiles", [])],
        "guard_failures": [[r["compile_id"], r["failed_entry"], r["category"], r["guard_key"]]
                           for r in rows.get("guard_failures", [])],
        "graph_breaks": [[r["compile_id"], r["source"], r["gb_type"], r["gb_code"], r["user_line"], r["break_key"]]
                         for r in rows.get("graph_breaks", [])],
        "limit_hits": [[r["compile_id"], r["limit_name"], r["limit_value"]] for r in rows.get("limit_hits", [])],
        "cache_events": dict(sorted(Counter(f"{r['cache']}:{r['outcome']}" for r in rows.get("cache_events", [])).items())),
        "compile_phases": dict(sorted(Counter(r["name"] for r in rows.get("compile_phases", [])).items())),
        "unknown_keys": sink.metadata.get("trace_unknown_keys", {}),
    }
