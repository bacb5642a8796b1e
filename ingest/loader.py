"""Paths in, rows in DuckDB out: the steps of an ingest, in order.

1. ``units.expand``        files, folders, bundles, archives -> units (one file each)
2. ``units.resolve_kind``  what the content is (a bundle's manifest confirms)
3. ``parsing.parse_into``  rows into a StagingSink, beside hashing + copying into the store's tmp/
4. ``parsing.refusal``     a file in which nothing is recognised is not a log: nothing is stored
5. ``commit.store_file``   the file's rows, files row and run in one transaction
6. ``report``              a FileResult per file

A file already stored (same sha256) is a duplicate: its parse is stopped early and nothing is
added. The writer lock is taken per file so the dashboard can read in between.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable

import duckdb

from compilewatch.core.errors import StoreError
from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.commit import FileRow, run_fields, store_file
from compilewatch.ingest.parsing import Parsed, Stop, parse_into, refusal
from compilewatch.ingest.results import (DUPLICATE, FAILED, PARTIAL, SKIPPED, STORED, FileResult, IngestReport,
                                         unreadable)
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.units import TEXT_BESIDE_TRACE, Unit, expand, resolve_kind
from compilewatch.store.files import publish_raw, stage_raw, stored_run

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current file name)
DUPLICATE_NOTE = "already stored (same sha256)"


def ingest_paths(store, paths, *, model: str | None = None, label: str | None = None,
                 torch_version: str | None = None, strict: bool = False, progress: Progress | None = None,
                 run_id: str | None = None, source: str = "cli", uploaded_by: str | None = None) -> IngestReport:
    """Ingest files, folders, bundles and archives. Never raises for bad input: each file's outcome
    is a FileResult. `run_id` groups loose files into one run (e.g. the ranks of one torchrun job);
    `uploaded_by` records the signed-in dashboard user on the runs it creates."""
    report = IngestReport()
    tmp_root = Path(tempfile.mkdtemp(prefix="ingest-", dir=store.tmp_dir))
    try:
        units, failures = expand(paths, tmp_root)
        report.files.extend(failures)
        sizes = [_size(u.path) for u in units]
        total, done = sum(sizes), 0
        for unit, size in zip(units, sizes):
            def on_bytes(b, _done=done, _name=unit.name, _size=size):
                progress(_done + min(b, _size), total, _name)
            if progress:
                progress(done, total, unit.name)
            options = dict(model=model, label=label, torch_version=torch_version, run_id=run_id, source=source,
                           uploaded_by=uploaded_by)
            report.files.append(ingest_unit(store, unit, strict=strict, on_bytes=on_bytes if progress else None,
                                            **options))
            done += size
        if progress:
            progress(total, total, "")
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return report


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _RawCopy(threading.Thread):
    """Hashes the file and copies it into the store's tmp/ beside the parser (hashlib and file I/O
    release the GIL, so on two cores this hides most of their cost), then looks for the same content
    in the store and, when it is there, stops the parse early."""

    def __init__(self, store, unit: Unit, run_id: str | None, stop: Stop):
        super().__init__(name="cw-hash", daemon=True)
        self.store, self.unit, self.forced_run_id, self.stop = store, unit, run_id, stop
        self.sha = self.staged = self.run_id = self.existing = None
        self.size = 0
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.sha, self.staged, self.size = stage_raw(self.store.tmp_dir, self.unit.path)
            m = self.unit.manifest
            self.run_id = m.run_id if m else (self.forced_run_id or f"loose-{self.sha[:16]}")
            with self.store.read() as con:
                self.existing = stored_run(con, self.sha, self.run_id, m is not None)
            if self.existing:
                self.stop()
        except Exception as e:  # reported by the caller's thread
            self.error = e
            self.stop()

    def discard(self) -> None:
        if self.staged is not None:
            self.staged.unlink(missing_ok=True)


def judge(unit: Unit, kind: str, sniffed: detect.Sniffed | None, parsed: Parsed, why: str | None) -> FileResult:
    """What ingest makes of a parsed file before the store is asked, from what parse_into found and
    the `refusal` it earned: refused (nothing of it is stored; failed when named explicitly, else
    skipped), failed (a bundle's file of an unknown kind), partial (lines it could not parse) or
    stored. Ingest and summarize both judge a file here."""
    if why is not None:
        return FileResult(unit.name, kind, FAILED if unit.explicit else SKIPPED, message=why, bad_input=unit.explicit)
    result = FileResult(unit.name, kind, STORED, records=dict(parsed.records), errors=parsed.errors)
    if kind == detect.UNKNOWN:
        result.status, result.message = FAILED, sniffed.reason
    elif parsed.errors:
        result.status, result.message = PARTIAL, f"{parsed.errors} line(s) could not be parsed"
    elif not unit.events:
        result.message = TEXT_BESIDE_TRACE
    return result


def ingest_unit(store, unit: Unit, *, sink=None, model=None, label=None, torch_version=None, strict=False,
                on_bytes=None, run_id=None, source="cli", uploaded_by=None) -> FileResult:
    """One file: resolve its kind, parse it beside the raw copy, refuse what is not a log, judge it,
    store it in one transaction. With `store` None it is a dry run, what `summarize` counts: the file
    is parsed into `sink` and judged the same way, with no raw copy, no duplicate check, no commit
    (with a store, rows are staged in a StagingSink of its own)."""
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(unit.name, detect.UNKNOWN, FAILED, message=unreadable(e))
    if store is None:
        parsed = parse_into(sink, unit, kind, sniffed, on_bytes)
        return judge(unit, kind, sniffed, parsed, refusal(unit, kind, sniffed, parsed))
    sink = StagingSink(store.tmp_dir)
    stop = Stop()
    raw = _RawCopy(store, unit, run_id, stop)
    raw.start()
    result = FileResult(unit.name, kind, STORED)
    try:
        parsed = parse_into(sink, unit, kind, sniffed, on_bytes, stop)
        raw.join()
        if raw.error is not None:
            if isinstance(raw.error, OSError):
                result.status, result.message = FAILED, unreadable(raw.error)
                return result
            raise raw.error
        why = refusal(unit, kind, sniffed, parsed)
        # (a parse stopped early because the content is stored already saw only part of the file)
        if raw.existing and (why is None or stop.requested):
            return FileResult(unit.name, kind, DUPLICATE, run_id=raw.existing, message=DUPLICATE_NOTE,
                              sha256=raw.sha, size_bytes=raw.size)
        result = judge(unit, kind, sniffed, parsed, why)
        if why is not None:   # nothing of it is stored: no files row, no run, no raw copy; a retry is refused again
            return result
        result.run_id, result.sha256, result.size_bytes = raw.run_id, raw.sha, raw.size
        if strict and parsed.errors:
            result.status, result.records = FAILED, {}
            result.message = f"--strict: {parsed.errors} line(s) could not be parsed; nothing stored"
            return result
        row = FileRow(run_id=raw.run_id, sha256=raw.sha, size_bytes=raw.size, kind=kind, original_name=unit.name,
                      stored_path=publish_raw(store.folder, raw.sha, raw.staged),
                      status="ok" if result.status == STORED else result.status,
                      records=result.total_records, errors=result.errors, bundled=unit.manifest is not None)
        run = run_fields(unit.manifest, model=model, label=label,
                         torch_version=torch_version or sink.metadata.get("torch_version"),
                         started_at=sniffed.started_at if sniffed else None, path=unit.path, source=source,
                         uploaded_by=uploaded_by)
        existing = store_file(store, sink, row, run)
        if existing:  # another process stored it since we looked
            result.status, result.run_id, result.message, result.records = DUPLICATE, existing, DUPLICATE_NOTE, {}
    except StoreError as e:
        result.status, result.message, result.records = FAILED, str(e), {}
    except duckdb.Error as e:
        result.status, result.message, result.records = FAILED, f"database error: {e}", {}
    finally:
        stop()  # a parse interrupted by an exception must not leave the copy waiting
        raw.join()
        raw.discard()
        sink.cleanup()
    return result
