"""Re-parse the raw files a store keeps, after a parser improved: the rows of each file are
replaced inside one transaction (commit.store_file), so a reader sees the old rows or the new ones,
never neither. Which files' events count follows the loader's rule (units.counts_events)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from compilewatch.ingest import PARSER_VERSION
from compilewatch.ingest import file_kind as detect
from compilewatch.ingest.commit import FileRow, store_file
from compilewatch.ingest.loader import HOLD_PARSE_BYTES
from compilewatch.ingest.parsing import parse_into
from compilewatch.ingest.staging import StagingSink
from compilewatch.ingest.units import Unit, counts_events


def reingest(store, all_files: bool = False) -> int:
    """Parse again the stored files whose parser is older than this one (all of them with
    all_files), each from its raw copy. Returns how many were parsed again: a file whose raw copy is
    gone is left as it is."""
    with store.read() as con:
        kinds_by_run: dict[str, set[str]] = defaultdict(set)
        for run_id, kind in con.execute("SELECT DISTINCT run_id, kind FROM files").fetchall():
            kinds_by_run[run_id].add(kind)
        files = con.execute(
            "SELECT file_id, run_id, kind, original_name, stored_path, sha256, size_bytes FROM files "
            "WHERE kind <> ? AND (? OR parser_version < ?) ORDER BY file_id",
            [detect.UNKNOWN, all_files, PARSER_VERSION]).fetchall()
    # one writer connection from file to file, as a folder ingest keeps it (loader.HOLD_PARSE_BYTES):
    # opening DuckDB and the checkpoint as it closes cost more than a small file's parse
    done = 0
    with store.writes_held():
        for file_id, run_id, kind, name, stored, sha, size in files:
            # the raw copy, in the store's folder or fetched from its bucket (store/objects.py)
            with store.location.local_file(stored, store.tmp_dir) as path:
                if path is not None:
                    _reparse(store, path, file_id, run_id, kind, name, stored, sha, size, kinds_by_run)
                    done += 1
    return done


def _reparse(store, path: Path, file_id, run_id, kind, name, stored, sha, size, kinds_by_run) -> None:
    if size >= HOLD_PARSE_BYTES:
        store.release_writes()   # readers should not wait for a large file's parse
    run_kinds = kinds_by_run[run_id]
    bundle_kinds = run_kinds if detect.MANIFEST in run_kinds else None
    unit = Unit(path, name, events=counts_events(kind, bundle_kinds))
    sink = StagingSink(store.tmp_dir)
    try:
        parsed = parse_into(sink, unit, kind, detect.sniff(path), raw_refs=True)   # path is the raw copy
        store_file(store, sink, FileRow(run_id=run_id, sha256=sha, size_bytes=size, kind=kind,
                                        original_name=name, stored_path=stored,
                                        status="partial" if parsed.errors else "ok",
                                        records=parsed.rows, errors=parsed.errors, file_id=file_id))
    finally:
        sink.cleanup()
