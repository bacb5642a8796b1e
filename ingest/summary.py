"""Parse without storing: the numbers `compilewatch summarize` and `compilewatch check` print.

`summarize` is the ingest pipeline run dry (``loader.ingest_unit`` with no store): each file is
expanded, resolved, parsed, refused and judged exactly as ingest would, into a sink that counts
what the summary shows, and nothing is copied or committed. Its rows and errors per file are the
pipeline's own counts (``FileResult``), so a new file kind or refusal rule changes both at once.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from compilewatch.ingest.loader import ingest_unit
from compilewatch.ingest.records import moved_line
from compilewatch.ingest.results import FAILED, SKIPPED, UNREADABLE, FileResult
from compilewatch.ingest.units import TEXT_BESIDE_TRACE, expand

MAX_ERROR_SAMPLES = 50


class CudagraphCounts:
    """CUDA-graph coverage as the rows show it (the figures store/run_metrics.py derives from the
    stored rows): graphs recorded (the trace's CUDAGraphNode.record spans, else the hooks' count),
    partitions, skips by reason and place, re-recordings, compiled calls replayed."""

    TABLES = ("compile_phases", "cudagraph_events", "timing_summaries")

    def __init__(self) -> None:
        self.traced = 0
        self.hooked = 0
        self.partitions = 0
        self.counted_skips = 0
        self.skips: Counter = Counter()   # (reason, "file:line") -> skip records
        self.rerecords = 0
        self.compiled_calls = 0
        self.replayed_calls: int | None = None

    def row(self, table: str, row: dict) -> None:
        if table == "compile_phases":
            self.traced += row.get("name") == "CUDAGraphNode.record"
        elif table == "cudagraph_events":
            if row.get("event") == "skip":
                where = f"{row['user_file']}:{row['user_line']}" if row.get("user_file") else ""
                self.skips[(row.get("reason") or "", where)] += 1
            elif row.get("event") == "re_record":
                self.rerecords += 1
        else:
            self.hooked += row.get("cudagraph_recordings") or 0
            self.partitions += row.get("cudagraph_partitions") or 0
            self.counted_skips += row.get("cudagraph_skips") or 0
            if row.get("replayed_calls") is not None:
                self.replayed_calls = (self.replayed_calls or 0) + row["replayed_calls"]
                self.compiled_calls += row.get("compiled_calls") or 0

    def merge(self, other: CudagraphCounts) -> None:
        self.traced += other.traced
        self.hooked += other.hooked
        self.partitions += other.partitions
        self.counted_skips += other.counted_skips
        self.skips.update(other.skips)
        self.rerecords += other.rerecords
        self.compiled_calls += other.compiled_calls
        if other.replayed_calls is not None:
            self.replayed_calls = (self.replayed_calls or 0) + other.replayed_calls

    def as_dict(self) -> dict | None:
        """None when nothing recorded, skipped or split a CUDA graph."""
        graphs = max(self.traced, self.hooked)
        if not (graphs or self.partitions or self.counted_skips or self.skips or self.rerecords):
            return None
        return {"graphs": graphs, "partitions": self.partitions, "skips": sum(self.skips.values()),
                "skips_counted_by_torch": self.counted_skips, "rerecords": self.rerecords,
                "replay_share": (round(self.replayed_calls / self.compiled_calls, 4)
                                 if self.replayed_calls is not None and self.compiled_calls else None),
                "skip_reasons": [{"reason": r, "where": w, "count": n} for (r, w), n in self.skips.most_common()]}


class SummarySink:
    """What one file gives beyond its row counts: distinct breaks, the functions recompiled, guard
    categories, compile ids, failed compiles, errors by kind. Counts as it goes, so memory stays
    flat however large the logs are."""

    def __init__(self, file: str = "") -> None:
        self.file = file
        self.break_keys: set[str] = set()
        self.recompiled_functions: Counter = Counter()
        self.guard_failures: Counter = Counter()
        self.compile_ids: set[tuple] = set()
        self.failures = 0
        self.error_samples: list[dict] = []
        self.error_kinds: Counter = Counter()
        self.errors_seen = 0   # every error, sampled or not: where a mark stands (see mark)
        self.metadata: dict = {}
        self.cudagraphs = CudagraphCounts()

    def row(self, table: str, row: dict) -> None:
        cid = row.get("compile_id")
        if cid:
            self.compile_ids.add((self.file if row.get("rank") is None else row.get("rank"), cid.split("_")[0]))
        if table == "graph_breaks":
            self.break_keys.add(row.get("break_key") or row.get("reason_norm") or row.get("reason") or "")
        elif table == "recompiles":
            self.recompiled_functions[row.get("function") or "<unknown>"] += 1
        elif table == "guard_failures":
            self.guard_failures[row.get("category") or "other"] += 1
        elif table == "compiles" and row.get("fail_type"):
            self.failures += 1
        elif table in CudagraphCounts.TABLES:
            self.cudagraphs.row(table, row)

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.errors_seen += 1
        self.error_kinds[kind] += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append({"file": self.file, "line": line_no, "kind": kind, "message": message})

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)

    def merge(self, other: SummarySink) -> None:
        """Add what `other` (one file's) found to this."""
        self._counts_of(other)
        self._samples_of(other.error_samples, other.errors_seen)

    # -- a large text log counted in ranges (ingest/text_ranges.py), each range into a part of its
    # own in its parse process: the parts' counts are added up and their error samples put in the
    # file's order. Staging the ranges' rows and reading them back instead took a quarter of
    # summarize's time on a 105 MB log (1.28 s against 0.92 s).
    def part(self) -> SummarySink:
        return SummarySink(self.file)

    def mark(self) -> tuple[None, int]:
        """Where this part stands, as StagingSink.mark says it (its rows' place, its errors'): its
        counts have no order, so only its errors have a place."""
        return None, self.errors_seen

    def append(self, part: SummarySink, recompile_offset: int = 0, start=None, stop=None,
               line_offset: int = 0) -> None:
        """Take the stretch of `part` between its marks `start` and `stop` (None: its beginning,
        its end), after what this holds: its errors in that stretch, their line numbers moved on by
        `line_offset` (a range numbers its lines from 1); its counts, which have no order, with the
        stretch that begins it."""
        lo = start[1] if start else 0
        hi = stop[1] if stop else part.errors_seen
        if start is None:
            self._counts_of(part)
        # a part keeps the first MAX_ERROR_SAMPLES of its errors: any later one has that many before it
        samples = part.error_samples[lo:hi]
        if line_offset:
            samples = [{**e, "line": moved_line(e["line"], line_offset)} for e in samples]
        self._samples_of(samples, hi - lo)

    def finish(self) -> None:
        pass

    def cleanup(self) -> None:
        pass

    def _counts_of(self, other: SummarySink) -> None:
        self.break_keys |= other.break_keys
        self.recompiled_functions.update(other.recompiled_functions)
        self.guard_failures.update(other.guard_failures)
        self.compile_ids |= other.compile_ids
        self.failures += other.failures
        self.error_kinds.update(other.error_kinds)
        self.cudagraphs.merge(other.cudagraphs)
        for k, v in other.metadata.items():
            self.metadata.setdefault(k, v)

    def _samples_of(self, samples: list[dict], seen: int) -> None:
        self.error_samples.extend(samples[: max(0, MAX_ERROR_SAMPLES - len(self.error_samples))])
        self.errors_seen += seen


def _unread(r: FileResult) -> bool:
    """A file that failed before anything in it was read: one "io" error in the summary."""
    return r.status == FAILED and r.message.startswith(UNREADABLE)


def _refused(r: FileResult) -> bool:
    """Judged not a log (loader.judge): nothing of it counts."""
    return r.status == SKIPPED or (r.status == FAILED and r.bad_input)


class _Summary:
    """The summary being built, file by file, in the order ingest would take them."""

    def __init__(self) -> None:
        self.totals = SummarySink()
        self.records: Counter = Counter()
        self.errors = 0
        self.details: list[dict] = []
        self.bad_input: list[str] = []

    def add_unexpanded(self, f: FileResult) -> None:
        """A path that could not be expanded into files (missing, an empty folder, a corrupt archive)."""
        if f.bad_input:
            self.bad_input.append(f"{f.name}: {f.message}")
        else:
            unread = SummarySink(f.name)
            unread.error(0, "io", f.message)
            self.totals.merge(unread)
            self.errors += 1
        self.details.append({"name": f.name, "kind": "unknown", "errors": 0 if f.bad_input else 1,
                             "status": "failed", "note": f.message})

    def add(self, r: FileResult, sink: SummarySink) -> None:
        """One file the pipeline judged (`r`), with what `sink` counted while it was parsed."""
        detail = {"name": r.name, "kind": r.kind, "records": r.total_records, "errors": r.errors}
        if _refused(r):
            if r.bad_input:
                self.bad_input.append(f"{r.name}: {r.message}")
            detail.update(status=r.status, note=r.message)
        elif _unread(r):
            sink.error(0, "io", r.message)
            detail.update(errors=1, status=r.status, note=r.message)
        elif r.message == TEXT_BESIDE_TRACE:
            detail["note"] = r.message
        if not _refused(r):
            self.totals.merge(sink)
            self.records.update(r.records)
            self.errors += detail["errors"]
        self.details.append(detail)

    def as_dict(self) -> dict:
        t = self.totals
        return {
            "files": len(self.details),
            "torch_version": t.metadata.get("torch_version"),
            "graph_breaks": self.records["graph_breaks"],
            "unique_graph_breaks": len(t.break_keys),
            "recompiles": self.records["recompiles"],
            "recompiled_functions": dict(t.recompiled_functions.most_common()),
            "guard_failures": dict(t.guard_failures.most_common()),
            "limit_hits": self.records["limit_hits"],
            "compile_ids": len(t.compile_ids),
            "failures": t.failures,
            "errors": self.errors,
            "error_kinds": dict(t.error_kinds),
            "error_samples": t.error_samples,
            "records": dict(self.records),
            "file_details": self.details,
            "bad_input": self.bad_input,
        } | ({"cudagraphs": cudagraphs} if (cudagraphs := t.cudagraphs.as_dict()) else {})


def summarize(paths, workers: int | None = None) -> dict:
    """The counts of every log under `paths`, parsed exactly as ingest would store them. Inputs
    that are missing or not logs are listed in file_details with status "failed" (named
    explicitly: `bad_input` in the result) or "skipped" (found by walking a folder or archive).
    A large log is parsed by `workers` processes (default: one per core), as ingest parses it."""
    workers = workers or os.cpu_count() or 1
    summary = _Summary()
    tmp_root = Path(tempfile.mkdtemp(prefix="cw-summary-"))
    try:
        units, failures = expand(paths, tmp_root)
        for f in failures:
            summary.add_unexpanded(f)
        for unit in units:
            if unit.role == "manifest" and unit.manifest and unit.manifest.torch_version:
                summary.totals.meta("torch_version", unit.manifest.torch_version)
            sink = SummarySink(unit.name)
            summary.add(ingest_unit(None, unit, sink=sink, ranges=workers), sink)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return summary.as_dict()
