"""Parse without storing: the numbers `compilewatch summarize` and `compilewatch check` print."""
from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.parsing import parse_into, refusal
from compilewatch.ingest.units import TEXT_BESIDE_TRACE, expand, resolve_kind


class SummarySink:
    """Counts as it goes, so memory stays flat however large the logs are."""

    def __init__(self) -> None:
        self.graph_breaks = 0
        self.break_keys: set[str] = set()
        self.recompiles = 0
        self.recompiled_functions: Counter = Counter()
        self.guard_failures: Counter = Counter()
        self.limit_hits = 0
        self.compile_ids: set[tuple] = set()
        self.failures = 0
        self.errors = 0
        self.error_samples: list[dict] = []
        self.error_kinds: Counter = Counter()
        self.metadata: dict = {}
        self.rows: Counter = Counter()
        self._file = ""

    def row(self, table: str, row: dict) -> None:
        self.rows[table] += 1
        cid = row.get("compile_id")
        if cid:
            self.compile_ids.add((self._file if row.get("rank") is None else row.get("rank"), cid.split("_")[0]))
        if table == "graph_breaks":
            self.graph_breaks += 1
            self.break_keys.add(row.get("break_key") or row.get("reason_norm") or row.get("reason") or "")
        elif table == "recompiles":
            self.recompiles += 1
            self.recompiled_functions[row.get("function") or "<unknown>"] += 1
        elif table == "guard_failures":
            self.guard_failures[row.get("category") or "other"] += 1
        elif table == "limit_hits":
            self.limit_hits += 1
        elif table == "compiles" and row.get("fail_type"):
            self.failures += 1

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.errors += 1
        self.error_kinds[kind] += 1
        if len(self.error_samples) < 50:
            self.error_samples.append({"file": self._file, "line": line_no, "kind": kind, "message": message})

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)

    def merge(self, other: "SummarySink") -> None:
        """Add the counts of `other` (one file's) to these."""
        self.graph_breaks += other.graph_breaks
        self.break_keys |= other.break_keys
        self.recompiles += other.recompiles
        self.recompiled_functions.update(other.recompiled_functions)
        self.guard_failures.update(other.guard_failures)
        self.limit_hits += other.limit_hits
        self.compile_ids |= other.compile_ids
        self.failures += other.failures
        self.errors += other.errors
        self.error_kinds.update(other.error_kinds)
        self.error_samples.extend(other.error_samples[: max(0, 50 - len(self.error_samples))])
        self.rows.update(other.rows)
        for k, v in other.metadata.items():
            self.metadata.setdefault(k, v)


def summarize(paths) -> dict:
    """The counts of every log under `paths`, parsed exactly as ingest would store them. Inputs
    that are missing or not logs are listed in file_details with status "failed" (named
    explicitly: `bad_input` in the result) or "skipped" (found by walking a folder or archive)."""
    sink = SummarySink()
    details = []
    bad_input = []
    tmp_root = Path(tempfile.mkdtemp(prefix="cw-summary-"))
    try:
        units, failures = expand(paths, tmp_root)
        for f in failures:
            sink._file = f.name
            if f.bad_input:
                bad_input.append(f"{f.name}: {f.message}")
            else:
                sink.error(0, "io", f.message)
            details.append({"name": f.name, "kind": "unknown", "errors": 0 if f.bad_input else 1,
                            "status": "failed", "note": f.message})
        for unit in units:
            sink._file = unit.name
            if unit.role == "manifest":
                if unit.manifest and unit.manifest.torch_version:
                    sink.meta("torch_version", unit.manifest.torch_version)
                details.append({"name": unit.name, "kind": detect.MANIFEST, "records": 0, "errors": 0})
                continue
            if not unit.events:  # a bundle's text beside its trace: the same events, counted once
                details.append({"name": unit.name, "kind": detect.TORCH_LOGS, "records": 0, "errors": 0,
                                "note": TEXT_BESIDE_TRACE})
                continue
            try:
                kind, sniffed = resolve_kind(unit)
            except OSError as e:
                sink.error(0, "io", f"cannot read: {e.strerror}")
                details.append({"name": unit.name, "kind": "unknown", "errors": 1})
                continue
            # the loader's own parse step into a scratch sink first: a file that is not a log
            # must leave the counts untouched, as ingest stores nothing of it
            trial = SummarySink()
            trial._file = unit.name
            parsed = parse_into(trial, unit, kind, sniffed)
            why = refusal(unit, kind, sniffed, parsed)
            if why is not None:
                details.append({"name": unit.name, "kind": kind, "records": 0, "errors": 0,
                                "status": "failed" if unit.explicit else "skipped", "note": why})
                if unit.explicit:
                    bad_input.append(f"{unit.name}: {why}")
                continue
            sink.merge(trial)
            details.append({"name": unit.name, "kind": kind, "records": parsed.rows, "errors": parsed.errors})
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return {
        "files": len(details),
        "torch_version": sink.metadata.get("torch_version"),
        "graph_breaks": sink.graph_breaks,
        "unique_graph_breaks": len(sink.break_keys),
        "recompiles": sink.recompiles,
        "recompiled_functions": dict(sink.recompiled_functions.most_common()),
        "guard_failures": dict(sink.guard_failures.most_common()),
        "limit_hits": sink.limit_hits,
        "compile_ids": len(sink.compile_ids),
        "failures": sink.failures,
        "errors": sink.errors,
        "error_kinds": dict(sink.error_kinds),
        "error_samples": sink.error_samples,
        "records": dict(sink.rows),
        "file_details": details,
        "bad_input": bad_input,
    }
