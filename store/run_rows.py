"""One run's rows of an event table, read without scanning the whole table."""
from __future__ import annotations


def run_filter(con, run_id: str | None, alias: str = "") -> str:
    """WHERE clause over an event table (``alias``) for one run's rows, with one ``?`` for its id.

    Besides the run id it bounds file_id by the run's files, as integer literals: every event row
    carries its file's id and a file's rows are appended together, so DuckDB's per-row-group min/max
    of file_id (and DuckLake's per-Parquet-file statistics) skip the rest of a table of millions of
    rows, which the run id alone cannot do (string statistics keep only a short prefix)."""
    a = f"{alias}." if alias else ""
    cur = con.cursor()
    try:
        lo, hi = cur.execute("SELECT min(file_id), max(file_id) FROM files WHERE run_id = ?", [run_id]).fetchone()
    finally:
        cur.close()
    if lo is None:
        return f"{a}run_id = ?"
    return f"{a}run_id = ? AND {a}file_id BETWEEN {int(lo)} AND {int(hi)}"
