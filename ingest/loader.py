"""Paths in, rows in DuckDB out: the steps of an ingest, in order.

1. ``units.expand``        files, folders, bundles, archives -> units (one file each)
2. ``units.resolve_kind``  what the content is (a bundle's manifest confirms)
3. ``parsing.parse_into``  rows into a StagingSink, beside hashing + copying into the store's tmp/
4. ``parsing.refusal``     a file in which nothing is recognised is not a log: nothing is stored
5. ``commit.store_file``   the file's rows, files row and run in one transaction
6. ``report``              a FileResult per file

A file already stored (same sha256) is a duplicate: its parse is stopped early and nothing is
added. The writer lock is taken per file so the dashboard can read in between. With several files
and `workers` > 1, steps 2-3 (and unpacking each archive of step 1) run in parse processes
(ingest/workers.py) and this process does the rest, the one writer, file by file in the same order.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass
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
from compilewatch.ingest.units import TEXT_BESIDE_TRACE, Unit, expand, resolve_kind, settle, unpack_all
from compilewatch.store.files import publish_raw, stage_raw, stored_run

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current file name)
DUPLICATE_NOTE = "already stored (same sha256)"


def ingest_paths(store, paths, *, model: str | None = None, label: str | None = None,
                 torch_version: str | None = None, strict: bool = False, progress: Progress | None = None,
                 run_id: str | None = None, source: str = "cli", uploaded_by: str | None = None,
                 workers: int = 1) -> IngestReport:
    """Ingest files, folders, bundles and archives. Never raises for bad input: each file's outcome
    is a FileResult. `run_id` groups loose files into one run (e.g. the ranks of one torchrun job);
    `uploaded_by` records the signed-in dashboard user on the runs it creates. With `workers` > 1
    and several files holding enough to parse (workers.pool_pays_off), files are parsed in that
    many worker processes and written by this one (ingest/workers.py), with the same results."""
    report = IngestReport()
    tmp_root = Path(tempfile.mkdtemp(prefix="ingest-", dir=store.tmp_dir))
    try:
        # With parse workers, archives are unpacked by the worker that parses their files; one
        # archive alone is unpacked here, so that its files are parsed on every core.
        units, failures = expand(paths, tmp_root, unpack_archives=workers < 2)
        if len(units) < 2:
            units, failures = unpack_all(units, failures, tmp_root)
        pool = False
        if workers > 1 and len(units) > 1:
            from compilewatch.ingest.workers import ingest_in_workers, pool_pays_off
            pool = pool_pays_off(units)
            if not pool:   # too little to parse for a worker's start to pay: all of it parsed here
                units, failures = unpack_all(units, failures, tmp_root)
        sizes = [_size(u.path) for u in units]
        options = dict(model=model, label=label, torch_version=torch_version, strict=strict, source=source,
                       uploaded_by=uploaded_by)
        if pool:
            with store.writes_held():
                results, unpacked = ingest_in_workers(store, units, sizes, tmp_root, workers,
                                                      run_id=run_id, options=options, progress=progress)
            report.files.extend(settle(failures, unpacked))
            report.files.extend(results)
        else:
            report.files.extend(failures)
            report.files.extend(_ingest_in_turn(store, units, sizes, workers, run_id, options, progress))
        if progress:
            progress(sum(sizes), sum(sizes), "")
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return report


# A file at least this large is parsed with the writer lock let go (store.writes_held): readers
# would otherwise wait for its whole parse (~0.3 s for 16 MB of text here).
HOLD_PARSE_BYTES = 16 << 20


def _ingest_in_turn(store, units, sizes, workers, run_id, options, progress) -> list[FileResult]:
    """Files one at a time, each parsed here (a large text log or trace in ranges) then stored; the
    writer connection is kept from one file to the next (store.writes_held)."""
    results = []
    total, done = sum(sizes), 0
    with store.writes_held():
        for unit, size in zip(units, sizes):
            def on_bytes(b, _done=done, _name=unit.name, _size=size):
                progress(_done + min(b, _size), total, _name)
            if progress:
                progress(done, total, unit.name)
            if size >= HOLD_PARSE_BYTES:
                store.release_writes()
            # with cores to spare and files one at a time, a large text log is parsed in ranges
            results.append(ingest_unit(store, unit, on_bytes=on_bytes if progress else None,
                                       run_id=run_id, ranges=workers, **options))
            done += size
    return results


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _RawCopy(threading.Thread):
    """Hashes the file and copies it into the store's tmp/ beside the parser (hashlib and file I/O
    release the GIL, so on two cores this hides most of their cost), then, when given a store,
    looks for the same content in it and, when it is there, stops the parse early. A parse worker
    has no store: the writer looks the content up instead (see commit_staged)."""

    def __init__(self, store, tmp_dir: Path, unit: Unit, run_id: str | None, stop: Stop):
        super().__init__(name="cw-hash", daemon=True)
        self.store, self.tmp_dir, self.unit, self.forced_run_id, self.stop = store, tmp_dir, unit, run_id, stop
        self.sha = self.staged = self.run_id = self.existing = None
        self.size = 0
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.sha, self.staged, self.size = stage_raw(self.tmp_dir, self.unit.path)
            m = self.unit.manifest
            self.run_id = m.run_id if m else (self.forced_run_id or f"loose-{self.sha[:16]}")
            if self.store is not None:
                with self.store.read() as con:
                    self.existing = stored_run(con, self.sha, self.run_id, m is not None)
                if self.existing:
                    self.stop()
        except Exception as e:  # reported by the caller's thread
            self.error = e
            self.stop()


@dataclass
class Staged:
    """One file parsed into a StagingSink and copied into the store's tmp/, not yet judged against
    the store: what parse_and_stage gives the writer (in this process, or from a parse worker).
    Plain data, so it crosses a process boundary."""
    unit: Unit
    kind: str
    sniffed: detect.Sniffed | None
    sink: StagingSink
    parsed: Parsed | None = None
    sha: str | None = None
    staged: Path | None = None          # the raw copy in tmp/, published into raw/ when stored
    size: int = 0
    run_id: str | None = None
    looked_up: bool = False             # `existing` is known (the parse stopped early when found)
    existing: str | None = None         # the run that holds this content already
    stopped: bool = False               # the parse was stopped early
    unreadable: str | None = None       # the raw copy could not read the file: why

    def discard(self) -> None:
        if self.staged is not None:
            self.staged.unlink(missing_ok=True)
        self.sink.cleanup()


def parse_and_stage(unit: Unit, kind: str, sniffed: detect.Sniffed | None, tmp_dir: Path, *, store=None,
                    run_id: str | None = None, on_bytes=None, ranges: int = 1) -> Staged:
    """Parse `unit` into a StagingSink under tmp_dir while another thread hashes and copies it
    there. With `store`, the content is looked up in it as soon as it is hashed and the parse
    stops early when it is stored already; without (a parse worker) the writer looks it up."""
    st = Staged(unit, kind, sniffed, StagingSink(tmp_dir))
    stop = Stop()
    raw = _RawCopy(store, tmp_dir, unit, run_id, stop)
    raw.start()
    try:
        # the raw copy made beside it is these very bytes: artifact rows may point into it
        st.parsed = parse_into(st.sink, unit, kind, sniffed, on_bytes, stop, ranges, raw_refs=True)
        raw.join()
    except BaseException:
        stop()  # a parse interrupted by an exception must not leave the copy waiting
        raw.join()
        st.staged = raw.staged
        st.discard()
        raise
    st.sha, st.staged, st.size, st.run_id = raw.sha, raw.staged, raw.size, raw.run_id
    st.looked_up, st.existing, st.stopped = store is not None, raw.existing, stop.requested
    if raw.error is not None:
        if not isinstance(raw.error, OSError):
            st.discard()
            raise raw.error
        st.unreadable = unreadable(raw.error)
    return st


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
                on_bytes=None, run_id=None, source="cli", uploaded_by=None, ranges: int = 1) -> FileResult:
    """One file: resolve its kind, parse it beside the raw copy, refuse what is not a log, judge it,
    store it in one transaction. With `store` None it is a dry run, what `summarize` counts: the file
    is parsed into `sink` and judged the same way, with no raw copy, no duplicate check, no commit
    (with a store, rows are staged in a StagingSink of its own). `ranges`: how many processes may
    parse one large text log (ingest/text_ranges.py)."""
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(unit.name, detect.UNKNOWN, FAILED, message=unreadable(e))
    if store is None:
        parsed = parse_into(sink, unit, kind, sniffed, on_bytes, ranges=ranges)
        return judge(unit, kind, sniffed, parsed, refusal(unit, kind, sniffed, parsed))
    try:
        st = parse_and_stage(unit, kind, sniffed, store.tmp_dir, store=store, run_id=run_id, on_bytes=on_bytes,
                             ranges=ranges)
    except (StoreError, duckdb.Error) as e:
        return FileResult(unit.name, kind, FAILED, message=_store_failure(e))
    return commit_staged(store, st, model=model, label=label, torch_version=torch_version, strict=strict,
                         source=source, uploaded_by=uploaded_by)


def commit_staged(store, st: Staged, *, model=None, label=None, torch_version=None, strict=False, source="cli",
                  uploaded_by=None) -> FileResult:
    """The writer's half of a file's ingest: the duplicate check, the judgement and the one
    transaction. The same rules, in the same order, whether the file was parsed here or in a
    worker process; the staged rows and raw copy are removed once it returns."""
    unit, kind, sniffed, parsed = st.unit, st.kind, st.sniffed, st.parsed
    result = FileResult(unit.name, kind, STORED)
    try:
        if st.unreadable is not None:
            result.status, result.message = FAILED, st.unreadable
            return result
        why = refusal(unit, kind, sniffed, parsed)
        # A file parsed in a worker was not looked up yet. When it would be stored, the store's
        # claim (store_file) finds the same content in the transaction that would write it, one
        # connection fewer per file; otherwise (refused, or --strict with bad lines) the lookup
        # decides first, as in one process.
        claim_decides = not st.looked_up and why is None and not (strict and parsed.errors)
        existing = st.existing if st.looked_up else None if claim_decides else _existing(store, st)
        # (a parse stopped early because the content is stored already saw only part of the file)
        if existing and (why is None or st.stopped):
            return _duplicate(st, existing)
        result = judge(unit, kind, sniffed, parsed, why)
        if why is not None:   # nothing of it is stored: no files row, no run, no raw copy; a retry is refused again
            return result
        result.run_id, result.sha256, result.size_bytes = st.run_id, st.sha, st.size
        if strict and parsed.errors:
            result.status, result.records = FAILED, {}
            result.message = f"--strict: {parsed.errors} line(s) could not be parsed; nothing stored"
            return result
        row = FileRow(run_id=st.run_id, sha256=st.sha, size_bytes=st.size, kind=kind, original_name=unit.name,
                      stored_path=publish_raw(store.location, st.sha, st.staged),
                      status="ok" if result.status == STORED else result.status,
                      records=result.total_records, errors=result.errors, bundled=unit.manifest is not None)
        run = run_fields(unit.manifest, model=model, label=label,
                         torch_version=torch_version or st.sink.metadata.get("torch_version"),
                         started_at=sniffed.started_at if sniffed else None, path=unit.path, source=source,
                         uploaded_by=uploaded_by)
        existing = store_file(store, st.sink, row, run)
        result.retries = row.retries
        if existing and claim_decides:
            return _duplicate(st, existing)
        if existing:  # another process stored it since we looked
            result.status, result.run_id, result.message, result.records = DUPLICATE, existing, DUPLICATE_NOTE, {}
    except (StoreError, duckdb.Error) as e:
        result.status, result.message, result.records = FAILED, _store_failure(e), {}
    finally:
        st.discard()
    return result


def _duplicate(st: Staged, existing: str) -> FileResult:
    return FileResult(st.unit.name, st.kind, DUPLICATE, run_id=existing, message=DUPLICATE_NOTE, sha256=st.sha,
                      size_bytes=st.size)


def _existing(store, st: Staged) -> str | None:
    if st.sha is None:
        return None
    with store.read() as con:
        return stored_run(con, st.sha, st.run_id, st.unit.manifest is not None)


def _store_failure(e: Exception) -> str:
    return str(e) if isinstance(e, StoreError) else f"database error: {e}"
