"""Re-parse the raw files a store keeps, after a parser improved: the rows of each file are
replaced inside one transaction, so a reader sees the old rows or the new ones, never neither."""
from __future__ import annotations

from pathlib import Path

from . import PARSER_VERSION, detect
from .derived import refresh_run
from .loader import StagingSink, _parse_into, _Unit
from .records import EVENT_TABLES


def reingest(store, all_files: bool = False) -> int:
    with store.read() as con:
        # `events` repeats the loader's rule: a bundle's text beside its trace is not counted again
        files = con.execute(
            "SELECT f.file_id, f.run_id, f.kind, f.original_name, f.stored_path, "
            "       NOT (f.kind = 'torch_logs' "
            "            AND EXISTS (SELECT 1 FROM files t WHERE t.run_id = f.run_id AND t.kind = 'torch_trace') "
            "            AND EXISTS (SELECT 1 FROM files m WHERE m.run_id = f.run_id AND m.kind = 'manifest')) AS events "
            "FROM files f WHERE f.kind NOT IN ('manifest', 'unknown') AND (? OR f.parser_version < ?) "
            "ORDER BY f.file_id",
            [all_files, PARSER_VERSION]).fetchall()
    for file_id, run_id, kind, name, stored, events in files:
        path = store.folder / stored
        if not Path(path).exists():
            continue
        sniffed = detect.sniff(path)
        sink = StagingSink(store.tmp_dir)
        try:
            _parse_into(sink, _Unit(Path(path), name, events=events), kind, sniffed, None)
            sink.finish()
            with store.write() as con:
                con.execute("BEGIN")
                try:
                    for t in (*EVENT_TABLES, "ingest_errors"):
                        con.execute(f"DELETE FROM {t} WHERE file_id = ?", [file_id]).fetchall()
                    sink.load(con, run_id, file_id, name)
                    con.execute("UPDATE files SET parser_version = ?, records = ?, errors = ?, status = ? WHERE file_id = ?",
                                [PARSER_VERSION, sum(sink.counts.values()), sink.error_count,
                                 "partial" if sink.error_count else "ok", file_id]).fetchall()
                    refresh_run(con, run_id)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        finally:
            sink.cleanup()
    return len(files)
