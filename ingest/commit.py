"""The store step: one file's rows, its files row and its run, written in one transaction.

This is the only place that writes a parsed file into the store, for ingest and reingest alike:
a reader sees all of a file or none of it, a crash mid-file leaves nothing (DuckDB rolls back on
reopen), and what is derived per run is refreshed here, inside the same transaction, or marked for
the store to refresh once for all of the run's files (FileClaim.refresh_later).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from compilewatch.core.heap import release_freed
from compilewatch.ingest import PARSER_VERSION
from compilewatch.ingest.records import EVENT_TABLES
from compilewatch.ingest.staging import StagedValuesCoerced, StagingSink
from compilewatch.store.derived import mark_stale, refresh_run


@dataclass
class FileRow:
    run_id: str
    sha256: str
    size_bytes: int
    kind: str
    original_name: str
    stored_path: str
    status: str                 # ok | partial | failed
    records: int
    errors: int
    bundled: bool = False       # a bundle's file: a duplicate only within the same run
    file_id: int | None = None  # set: replace the rows of this stored file (reingest)
    retries: int = 0            # set by store_file: commits that lost a race with another host's and ran again


def store_file(store, sink: StagingSink, f: FileRow, run: dict | None = None) -> str | None:
    """Write f's rows (from `sink`), its files row and (when given) its run's fields in one
    transaction. Returns the run that already holds the same content, in which case nothing is
    written. The file's claim (store.claim_file: the embedded store's writer lock, DuckLake's
    claims) makes "is it stored already?" and the write one step, so two processes or hosts never
    store one file twice; the rows are written here, in the transactions the claim hands out. The
    commits run again because another host's commit conflicted are counted in f.retries."""
    release_freed()   # what the parse freed, not held under the DuckDB load (core/heap.py)
    if f.file_id is not None:   # a stored file parsed again: its rows are replaced
        with store.rewrite_file() as claim:
            f.retries = _in_transactions(claim.transactions, lambda con: _write(con, sink, f, f.file_id, True, run,
                                                                                claim.refresh_later))
        return None
    with store.claim_file(f.sha256, f.run_id, f.bundled) as claim:
        if claim.stored_under is not None:
            return claim.stored_under
        f.retries = _in_transactions(claim.transactions, lambda con: _write(con, sink, f, claim.file_id,
                                                                            claim.run_exists, run,
                                                                            claim.refresh_later, claim.run_written))
        claim.committed(run)
    return None


def _in_transactions(transactions, write) -> int:
    """write(con) in the attempts `transactions()` hands out; once more when a staged batch had to be
    coerced (staging.StagedValuesCoerced: its failed INSERT ended the transaction). Returns how many
    attempts ran again after a conflicting commit: each attempt after the first in one run of
    `transactions()` follows one that lost its race."""
    retries = 0
    for again in (False, True):
        attempts = 0
        try:
            for attempt in transactions():
                retries += attempts > 0
                attempts += 1
                with attempt as con:
                    write(con)
            return retries
        except StagedValuesCoerced:
            if again:
                raise
    return retries


def _write(con, sink: StagingSink, f: FileRow, file_id: int, run_exists: bool, run: dict | None,
           refresh_later: bool = False, run_written: dict | None = None) -> None:
    """One file's rows, files row, run and derived per-run facts (or the marker that they lag),
    inside the caller's transaction. `run_written`: the run's fields and marker as stored already
    (FileClaim.run_written)."""
    if f.file_id is not None:
        for t in (*EVENT_TABLES, "ingest_errors"):
            con.execute(f"DELETE FROM {t} WHERE file_id = ?", [file_id]).fetchall()
    sink.load(con, f.run_id, file_id, f.original_name)
    if run is not None and not (run_exists and run == run_written):
        _upsert_run(con, f.run_id, run_exists, run)
    if f.file_id is None:
        con.execute(
            "INSERT INTO files (file_id, run_id, sha256, size_bytes, kind, original_name, stored_path, status, "
            "parser_version, records, errors) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [file_id, f.run_id, f.sha256, f.size_bytes, f.kind, f.original_name, f.stored_path, f.status,
             PARSER_VERSION, f.records, f.errors]).fetchall()
    else:
        con.execute("UPDATE files SET parser_version = ?, records = ?, errors = ?, status = ? WHERE file_id = ?",
                    [PARSER_VERSION, f.records, f.errors, f.status, file_id]).fetchall()
    if refresh_later:   # the store refreshes the run once, after the last of its files it writes in a row
        if run_written is None:
            mark_stale(con, f.run_id)
    else:               # what is derived per run (hardware, run_metrics, rollups), in this transaction
        refresh_run(con, f.run_id)


def run_fields(manifest, *, model, label, torch_version, started_at, path: Path, source: str,
               uploaded_by: str | None = None) -> dict:
    """The runs row for a file: from its bundle's manifest, else from the options and the file."""
    m = manifest
    if m is not None:
        return dict(model=m.model or model, label=m.label or label, command=" ".join(m.command) if m.command else None,
                    started_at=_ts(m.started_at), ended_at=_ts(m.ended_at), exit_status=m.exit_status,
                    end_reason=m.end_reason, host=m.host, git_commit=m.git_commit,
                    torch_version=m.torch_version or torch_version, triton_version=m.triton_version,
                    cuda_version=m.cuda_version, python_version=m.python_version, gpu_name=m.gpu_name,
                    source="bundle" if source == "cli" else source, manifest_json=m.to_json(), uploaded_by=uploaded_by)
    if started_at is None:
        started_at = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    return dict(model=model, label=label, command=None, started_at=_ts(started_at), ended_at=None,
                exit_status=None, end_reason=None, host=None, git_commit=None, torch_version=torch_version,
                triton_version=None, cuda_version=None, python_version=None, gpu_name=None,
                source="loose" if source == "cli" else source, manifest_json=None, uploaded_by=uploaded_by)


def _upsert_run(con, run_id: str, run_exists: bool, values: dict) -> None:
    cols = list(values)
    if run_exists:
        # A run seen again (another file of the same bundle or of the same --run-id) only fills gaps.
        # No ON CONFLICT: neither store keys runs (migration 017); the claim keeps run_exists current.
        sets = ", ".join(f"{c} = coalesce({c}, ?)" for c in cols)
        con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*values.values(), run_id]).fetchall()
    else:
        con.execute(f"INSERT INTO runs (run_id, {', '.join(cols)}) VALUES (?, {', '.join('?' * len(cols))})",
                    [run_id, *values.values()]).fetchall()


def _ts(value) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)
    except ValueError:
        return None
