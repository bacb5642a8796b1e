"""Paths in, rows in DuckDB out.

One unit of work is one file: it is hashed, checked against the files table (same sha256 ->
'duplicate', nothing added), copied into raw/, parsed, and stored in a single transaction together
with its files row and its ingest_errors. A crash mid-file therefore stores nothing of that file,
and a retry stores it once. The writer lock is taken per file so the dashboard can read in between.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import duckdb

from . import PARSER_VERSION
from . import archives
from . import bundle as bundle_mod
from . import detect
from .derived import refresh_run
from .errors import InputError, StoreError
from .jsonfast import dumps_line, loads
from .records import EVENT_TABLES

Progress = Callable[[int, int, str], None]  # (bytes done, bytes total, current file name)


@dataclass
class FileResult:
    name: str
    kind: str
    status: str                     # stored | partial | duplicate | failed
    run_id: str | None = None
    records: dict = field(default_factory=dict)
    errors: int = 0
    message: str = ""
    sha256: str | None = None
    size_bytes: int = 0

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def errors(self) -> int:
        return sum(f.errors for f in self.files)

    @property
    def ok(self) -> bool:
        return not any(f.status == "failed" for f in self.files)


@dataclass
class _Unit:
    path: Path
    name: str
    role: str | None = None               # from a bundle manifest; None = sniff
    manifest: bundle_mod.Manifest | None = None
    # False for a bundle's TORCH_LOGS text when the bundle also has a TORCH_TRACE: both describe the
    # same graph breaks and recompiles, so counting both would double every number. The trace is the
    # structured, complete source; the text is still kept raw and listed with the run.
    events: bool = True


def parser_for(kind: str):
    """kind -> parse(stream, sink). Imported lazily: each parser is its own module."""
    if kind == detect.TORCH_TRACE:
        from .trace import parse_trace
        return parse_trace
    if kind == detect.TORCH_LOGS:
        from .text import parse_text
        return parse_text
    if kind == detect.BENCH_CSV:
        from .bench_csv import parse_bench_csv
        return parse_bench_csv
    if kind == detect.TIMINGS:
        from .timings import parse_timings
        return parse_timings
    return None


_LINE_KINDS = (detect.TORCH_TRACE, detect.TORCH_LOGS)
_ROLE_KIND = {"torch_logs": detect.TORCH_LOGS, "torch_trace": detect.TORCH_TRACE,
              "timings": detect.TIMINGS, "timings_ranks": detect.TIMINGS, "bench": detect.BENCH_CSV, "manifest": detect.MANIFEST}


# -- expanding paths into units -------------------------------------------------------------------

def expand(paths: Iterable[Path], tmp_root: Path, limits: archives.ArchiveLimits | None = None) -> tuple[list[_Unit], list[FileResult]]:
    """Files, folders, bundles and archives -> units of work. A path that cannot be read becomes a
    failed FileResult; inside a folder that is per entry, so one corrupt archive or manifest among
    a hundred bundles fails alone. Archives follow ingest/archives.py's rules and caps."""
    units: list[_Unit] = []
    failures: list[FileResult] = []
    limits = limits or archives.ArchiveLimits.from_settings()
    for p in paths:
        p = Path(p)
        if not p.exists():
            failures.append(FileResult(p.name, "unknown", "failed",
                                       message=str(InputError(f"no such file or folder: {p}", "check the path"))))
        elif p.is_dir() or bundle_mod.is_archive(p):
            _expand_entry(p, p.name, tmp_root, units, failures, archives.Budget(limits), 0)
        else:
            units.append(_Unit(p, p.name))
    return units, failures


def _expand_entry(p: Path, name: str, tmp_root: Path, units: list, failures: list,
                  budget: archives.Budget, depth: int) -> None:
    try:
        if p.is_file():  # an archive: unpacked under the ingest's temp root, removed at the end
            if depth == 0:
                budget = archives.Budget(budget.limits)  # each top-level archive gets the full caps
            depth += 1
            if depth > budget.limits.max_depth:
                raise archives.ArchiveError(f"{name}: archives nested deeper than {budget.limits.max_depth} levels",
                                            "unpack the inner archives, or raise COMPILEWATCH_ARCHIVE_MAX_DEPTH")
            p = bundle_mod.extract_archive(p, Path(tempfile.mkdtemp(dir=tmp_root)), budget, name)
        if bundle_mod.is_bundle_dir(p):
            units.extend(_bundle_units(p, name))
            return
    except (InputError, OSError) as e:
        failures.append(FileResult(name, "unknown", "failed", message=str(e)))
        return
    for dirpath, dirnames, filenames in os.walk(p):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        d = Path(dirpath)
        if d != p and bundle_mod.is_bundle_dir(d):
            _expand_entry(d, f"{name}/{d.relative_to(p).as_posix()}", tmp_root, units, failures, budget, depth)
            dirnames[:] = []
            continue
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            fp = d / fn
            rel = f"{name}/{fp.relative_to(p).as_posix()}"
            if bundle_mod.is_archive(fp):
                _expand_entry(fp, rel, tmp_root, units, failures, budget, depth)
            else:
                units.append(_Unit(fp, rel))


def _bundle_units(root: Path, prefix: str) -> list[_Unit]:
    manifest = bundle_mod.read_manifest(root)
    units = [_Unit(root / bundle_mod.MANIFEST, f"{prefix}/{bundle_mod.MANIFEST}", "manifest", manifest)]
    roles = bundle_mod.bundle_files(root, manifest)
    has_trace = bool(roles.get("torch_trace"))
    for role, files in roles.items():
        for f in files:
            units.append(_Unit(f, f"{prefix}/{f.relative_to(root).as_posix()}", role, manifest,
                               events=not (role == "torch_logs" and has_trace)))
    return units


# -- the sink that writes ---------------------------------------------------------------------------

_columns_cache: dict[str, list[tuple[str, str]]] = {}


def table_columns(con, table: str) -> list[tuple[str, str]]:
    if table not in _columns_cache:
        rows = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [table]).fetchall()
        _columns_cache[table] = rows
    return _columns_cache[table]


_PY_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "BOOLEAN": bool}


def _coerce(value, sql_type: str):
    """Last resort when a parser handed a value of the wrong type: make it fit, or null."""
    if value is None:
        return None
    conv = _PY_TYPES.get(sql_type)
    try:
        if conv is None:
            return value if isinstance(value, str) else json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
        return conv(value)
    except (TypeError, ValueError, OverflowError):
        return None


class StagingSink:
    """Parsed rows are staged as newline-delimited JSON, one file per table, outside the database;
    the store then loads each table with a single read_json INSERT. This keeps the write lock short
    (parsing happens before it is taken), DuckDB's memory flat (one bulk append per table instead of
    many small ones) and the ingest process free of pyarrow/pandas."""

    MAX_STORED_ERRORS = 10_000  # every error is counted; a 2 GB binary file is still one problem

    def __init__(self, tmp_dir: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="stage-", dir=tmp_dir))
        self.files: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        self.errors: list[tuple] = []
        self.error_count = 0
        self.metadata: dict = {}

    abort = False  # set from the hashing thread when the file turns out to be stored already

    def row(self, table: str, row: dict) -> None:
        if self.abort:
            raise _Duplicate
        f = self.files.get(table)
        if f is None:
            if table not in EVENT_TABLES:
                self.metadata.setdefault("unknown_tables", set()).add(table)
                return
            f = self.files[table] = open(self.dir / f"{table}.ndjson", "wb")
        f.write(dumps_line(row))
        self.counts[table] = self.counts.get(table, 0) + 1

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        self.error_count += 1
        if len(self.errors) < self.MAX_STORED_ERRORS:
            self.errors.append((line_no, kind, message, (excerpt or "")[:500]))

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)

    def finish(self) -> None:
        for f in self.files.values():
            f.close()

    def load(self, con, run_id: str, file_id: int, original_name: str) -> None:
        """INSERT every staged table; must run inside the caller's transaction."""
        for table in self.files:
            path = self.dir / f"{table}.ndjson"
            cols = [(c, t) for c, t in table_columns(con, table) if c not in ("run_id", "file_id")]
            # JSON has no bytes: a BLOB column is staged as base64 text and decoded here
            spec = "{" + ", ".join(f"'{c}': '{'VARCHAR' if t == 'BLOB' else t}'" for c, t in cols) + "}"
            names = ", ".join(c for c, _ in cols)
            values = ", ".join(f"from_base64({c})" if t == "BLOB" else c for c, t in cols)
            sql = (f"INSERT INTO {table} (run_id, file_id, {names}) SELECT ?, ?, {values} "
                   f"FROM read_json(?, format='newline_delimited', columns={spec})")
            try:
                con.execute(sql, [run_id, file_id, str(path)]).fetchall()
            except (duckdb.ConversionException, duckdb.InvalidInputException):
                # A parser emitted a value of the wrong type: coerce column by column, then load.
                fixed = path.with_suffix(".fixed")
                with open(path, "rb") as fin, open(fixed, "wb") as fout:
                    for line in fin:
                        r = loads(line)
                        fout.write(dumps_line({c: _coerce(r.get(c), t) for c, t in cols}))
                con.execute(sql, [run_id, file_id, str(fixed)]).fetchall()
        if self.errors:
            con.executemany("INSERT INTO ingest_errors VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [(run_id, file_id, original_name, *e) for e in self.errors])

    def cleanup(self) -> None:
        self.finish()
        shutil.rmtree(self.dir, ignore_errors=True)


class _ProgressStream:
    """Iterates lines of `inner` and reports how far into the (possibly compressed) file we are."""

    def __init__(self, inner, raw, on_bytes: Callable[[int], None] | None):
        self.inner, self.raw, self.on_bytes = inner, raw, on_bytes

    def __iter__(self):
        if self.on_bytes is None:
            yield from self.inner
            return
        n = 0
        for line in self.inner:
            yield line
            n += 1
            if n & 0x3FFF == 0:
                self.on_bytes(self.raw.tell())

    def read(self, *a):
        # the text reader pulls 1 MiB blocks through read(): report progress per block
        data = self.inner.read(*a)
        if self.on_bytes is not None:
            self.on_bytes(self.raw.tell())
        return data

    def readline(self, *a):
        return self.inner.readline(*a)


def _one(con, sql: str, params=None):
    # fetchall, not fetchone: DuckDB 2 keeps a partly fetched result open and refuses the next statement.
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def _ts(value) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)
    except ValueError:
        return None


# -- the entry point --------------------------------------------------------------------------------

def ingest_paths(store, paths, *, model: str | None = None, label: str | None = None,
                 torch_version: str | None = None, strict: bool = False, progress: Progress | None = None,
                 run_id: str | None = None, source: str = "cli") -> IngestReport:
    """Ingest files, folders, bundles and archives. Never raises for bad input: each file's outcome
    is a FileResult. `run_id` groups loose files into one run (e.g. the ranks of one torchrun job)."""
    report = IngestReport()
    tmp_root = Path(tempfile.mkdtemp(prefix="ingest-", dir=store.tmp_dir))
    try:
        units, failures = expand(paths, tmp_root)
        report.files.extend(failures)
        sizes = []
        for u in units:
            try:
                sizes.append(u.path.stat().st_size)
            except OSError:
                sizes.append(0)
        total, done = sum(sizes), 0
        for unit, size in zip(units, sizes):
            def on_bytes(b, _done=done, _name=unit.name):
                if progress:
                    progress(_done + min(b, size), total, _name)
            if progress:
                progress(done, total, unit.name)
            report.files.append(_ingest_one(store, unit, model, label, torch_version, strict, on_bytes if progress else None, run_id, source))
            done += size
        if progress:
            progress(total, total, "")
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return report


def _existing(con, sha: str, rid: str, bundled: bool):
    if bundled:
        return _one(con, "SELECT run_id FROM files WHERE sha256 = ? AND run_id = ?", [sha, rid])
    return _one(con, "SELECT run_id FROM files WHERE sha256 = ? LIMIT 1", [sha])


TEXT_BESIDE_TRACE = "kept raw; this bundle's events come from its TORCH_TRACE"


def resolve_kind(unit: _Unit):
    """(kind, Sniffed or None): the content decides, a bundle's manifest role confirms it. Raises
    OSError when the file cannot be read."""
    if unit.role == "manifest":
        return detect.MANIFEST, None
    sniffed = detect.sniff(unit.path, now=datetime.fromtimestamp(unit.path.stat().st_mtime, timezone.utc))
    kind = sniffed.kind
    if unit.role and _ROLE_KIND.get(unit.role) and kind != detect.UNKNOWN:
        kind = _ROLE_KIND[unit.role]
    return kind, sniffed


def _parse_into(sink, unit: _Unit, kind: str, sniffed, on_bytes) -> None:
    if not unit.events:
        return
    if kind == detect.UNKNOWN:
        sink.error(0, "unknown_format", sniffed.reason or "not a TORCH_TRACE, TORCH_LOGS text, bundle or benchmark CSV", "")
        return
    parse = parser_for(kind)
    if parse is None:
        return
    with open(unit.path, "rb") as raw:
        inner = detect.open_binary(unit.path) if sniffed and sniffed.gzipped else raw
        stream = _ProgressStream(inner, raw, on_bytes) if kind in _LINE_KINDS else inner
        try:
            parse(stream, sink)
            why = detect.damage(inner)
            if why:  # a gzip cut short or damaged: what decoded before it is kept
                sink.error(0, "truncated", why, "")
        except (EOFError, OSError) as e:
            sink.error(0, "truncated", f"the file could not be read to its end: {e}", "")
        except Exception as e:  # a parser bug must not lose the rest of the file
            sink.error(0, "internal", f"parser failed: {type(e).__name__}: {e}", "")
        finally:
            if inner is not raw:
                inner.close()


class _Duplicate(BaseException):
    """Raised through a parser (BaseException: parsers catch Exception) once the hashing thread
    finds the file already stored, so a re-upload is not parsed to the end."""


def _ingest_one(store, unit: _Unit, model, label, torch_version, strict, on_bytes, forced_run_id, source) -> FileResult:
    name = unit.name
    m = unit.manifest
    try:
        kind, sniffed = resolve_kind(unit)
    except OSError as e:
        return FileResult(name, "unknown", "failed", message=f"cannot read: {e.strerror}")
    result = FileResult(name, kind, "stored")
    duplicate = "already stored (same sha256)"
    sink = StagingSink(store.tmp_dir)

    # Hashing + copying into raw/ runs beside the parser: hashlib and file I/O release the GIL, so on
    # two cores this hides most of their cost. The hashing thread also checks for a duplicate and,
    # if found, stops the parse early.
    hashed: dict = {}

    def hash_and_check():
        try:
            hashed["sha"], hashed["stored"], hashed["size"] = store.keep_raw(unit.path)
            rid = m.run_id if m else (forced_run_id or f"loose-{hashed['sha'][:16]}")
            hashed["rid"] = rid
            with store.read() as con:
                existing = _existing(con, hashed["sha"], rid, m is not None)
            if existing:
                hashed["existing"] = existing[0]
                sink.abort = True
        except BaseException as e:  # re-raised in the caller's thread
            hashed["error"] = e
    worker = threading.Thread(target=hash_and_check, name="cw-hash", daemon=True)
    worker.start()
    try:
        try:
            _parse_into(sink, unit, kind, sniffed, on_bytes)
        except _Duplicate:
            pass
        worker.join()
        if "error" in hashed:
            err = hashed["error"]
            if isinstance(err, OSError):
                result.status, result.message = "failed", f"cannot read: {err.strerror}"
                return result
            raise err
        sha, stored_path, size, rid = hashed["sha"], hashed["stored"], hashed["size"], hashed["rid"]
        result.run_id, result.sha256, result.size_bytes = rid, sha, size
        if "existing" in hashed:
            result.status, result.run_id, result.message = "duplicate", hashed["existing"], duplicate
            return result
        sink.finish()
        result.records = dict(sink.counts)
        result.errors = sink.error_count
        if kind == detect.UNKNOWN:
            result.status, result.message = "failed", sniffed.reason
        elif sink.error_count:
            result.status, result.message = "partial", f"{sink.error_count} line(s) could not be parsed"
        elif not unit.events:
            result.message = TEXT_BESIDE_TRACE
        if strict and sink.error_count:
            result.status, result.records = "failed", {}
            result.message = f"--strict: {sink.error_count} line(s) could not be parsed; nothing stored"
            return result
        def write_rows(con, file_id, run_exists):
            sink.load(con, rid, file_id, name)
            _upsert_run(con, rid, run_exists, m, model, label, torch_version or sink.metadata.get("torch_version"),
                        sniffed.started_at if sniffed else None, unit.path, source)
            con.execute(
                "INSERT INTO files (file_id, run_id, sha256, size_bytes, kind, original_name, stored_path, status, parser_version, records, errors) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [file_id, rid, sha, size, kind, name, stored_path, result.status if result.status != "stored" else "ok",
                 PARSER_VERSION, result.total_records, result.errors]).fetchall()
            refresh_run(con, rid)   # hardware + run_metrics, in this file's transaction

        # The store makes "is it stored already?" and the write one step (embedded: the writer lock;
        # DuckLake: a claim in PostgreSQL), so two processes or hosts never store one file twice.
        existing = store.store_file(sha, rid, m is not None, write_rows,
                                    lambda con: (_existing(con, sha, rid, m is not None) or [None])[0])
        if existing:
            result.status, result.run_id, result.message, result.records = "duplicate", existing, duplicate, {}
            return result
    except StoreError as e:
        result.status, result.message, result.records = "failed", str(e), {}
    except duckdb.Error as e:
        result.status, result.message, result.records = "failed", f"database error: {e}", {}
    finally:
        sink.abort = True  # a parse interrupted by an exception must not leave the worker hanging
        worker.join()
        sink.cleanup()
    return result


def _upsert_run(con, rid, run_exists, m, model, label, torch_version, started_at, path: Path, source) -> None:
    if m is not None:
        values = dict(model=m.model or model, label=m.label or label, command=" ".join(m.command) if m.command else None,
                      started_at=_ts(m.started_at), ended_at=_ts(m.ended_at), exit_status=m.exit_status,
                      end_reason=m.end_reason, host=m.host, git_commit=m.git_commit,
                      torch_version=m.torch_version or torch_version, triton_version=m.triton_version,
                      cuda_version=m.cuda_version, python_version=m.python_version, gpu_name=m.gpu_name,
                      source="bundle" if source == "cli" else source, manifest_json=m.to_json())
    else:
        if started_at is None:
            started_at = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        values = dict(model=model, label=label, command=None, started_at=_ts(started_at), ended_at=None,
                      exit_status=None, end_reason=None, host=None, git_commit=None, torch_version=torch_version,
                      triton_version=None, cuda_version=None, python_version=None, gpu_name=None,
                      source="loose" if source == "cli" else source, manifest_json=None)
    cols = list(values)
    if run_exists:
        # A run seen again (another file of the same bundle or of the same --run-id) only fills gaps.
        # No ON CONFLICT: DuckLake has no keys; the store guarantees run_exists is current.
        sets = ", ".join(f"{c} = coalesce({c}, ?)" for c in cols)
        con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*values.values(), rid]).fetchall()
    else:
        con.execute(f"INSERT INTO runs (run_id, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                    [rid, *values.values()]).fetchall()
