"""Re-parse the raw files a store keeps, after a parser improved: the rows of each file are
replaced inside one transaction, so a reader sees the old rows or the new ones, never neither."""
from __future__ import annotations

from pathlib import Path

from . import PARSER_VERSION, detect
from .loader import StagingSink, _parse_into, _Unit
from .records import EVENT_TABLES


def reingest(store, all_files: bool = False) -> int:
    with store.read() as con:
        files = con.execute(
            "SELECT file_id, run_id, kind, original_name, stored_path FROM files "
            "WHERE kind NOT IN ('manifest', 'unknown') AND (? OR parser_version < ?) ORDER BY file_id",
            [all_files, PARSER_VERSION]).fetchall()
    for file_id, run_id, kind, name, stored in files:
        path = store.folder / stored
        if not Path(path).exists():
            continue
        sniffed = detect.sniff(path)
        sink = StagingSink(store.tmp_dir)
        try:
            _parse_into(sink, _Unit(Path(path), name), kind, sniffed, None)
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
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        finally:
            sink.cleanup()
    return len(files)
