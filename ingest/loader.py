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
from compilewatch.ingest.commit import FileRow, run_fields, store_file, stored_run
from compilewatch.ingest.parsing import Stop, parse_into, refusal
from compilewatch.ingest.results import DUPLICATE, FAILED, PARTIAL, SKIPPED, STORED, FileResult, IngestReport
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.units import TEXT_BESIDE_TRACE, Unit, expand, resolve_kind
from compilewatch.store.files import publish_raw, stage_raw

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


def ingest_unit(store, unit: Unit, *, model=None, label=None, torch_version=None, strict=False,
                on_bytes=None, run_id=None, source="cli", uploaded_by=None) -> FileResult:
    """One file: resolve, parse beside the raw copy, refuse what is not a log, store in one transaction."""
    name = unit.name
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(name, detect.UNKNOWN, FAILED, message=f"cannot read: {e.strerror}")
    result = FileResult(name, kind, STORED)
    sink = StagingSink(store.tmp_dir)
    stop = Stop()
    raw = _RawCopy(store, unit, run_id, stop)
    raw.start()
    try:
        parsed = parse_into(sink, unit, kind, sniffed, on_bytes, stop)
        raw.join()
        if raw.error is not None:
            if isinstance(raw.error, OSError):
                result.status, result.message = FAILED, f"cannot read: {raw.error.strerror}"
                return result
            raise raw.error
        why = refusal(unit, kind, sniffed, parsed)
        # (a parse stopped early because the content is stored already saw only part of the file)
        if why is not None and not (raw.existing and stop.requested):
            # Nothing of it is stored: no files row, no run, no raw copy; a retry is refused again.
            result.status, result.message, result.bad_input = (FAILED if unit.explicit else SKIPPED), why, unit.explicit
            return result
        result.run_id, result.sha256, result.size_bytes = raw.run_id, raw.sha, raw.size
        if raw.existing:
            result.status, result.run_id, result.message = DUPLICATE, raw.existing, DUPLICATE_NOTE
            return result
        result.records = dict(sink.counts)
        result.errors = sink.error_count
        if kind == detect.UNKNOWN:
            result.status, result.message = FAILED, sniffed.reason
        elif sink.error_count:
            result.status, result.message = PARTIAL, f"{sink.error_count} line(s) could not be parsed"
        elif not unit.events:
            result.message = TEXT_BESIDE_TRACE
        if strict and sink.error_count:
            result.status, result.records = FAILED, {}
            result.message = f"--strict: {sink.error_count} line(s) could not be parsed; nothing stored"
            return result
        row = FileRow(run_id=raw.run_id, sha256=raw.sha, size_bytes=raw.size, kind=kind, original_name=name,
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
