"""Parsed rows on their way into DuckDB: staged as newline-delimited JSON, one file per table,
then loaded with one INSERT per table inside the store step's transaction."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import duckdb

from compilewatch.ingest.jsonfast import dumps_line, loads

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
    many small ones) and the ingest process free of pyarrow/pandas. Table names are checked, and
    rows and errors counted, by the parse step (parsing.parse_into) before they get here."""

    MAX_STORED_ERRORS = 10_000  # every error is counted (Parsed.errors); a 2 GB binary file is still one problem

    def __init__(self, tmp_dir: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="stage-", dir=tmp_dir))
        self.files: dict[str, object] = {}
        self.errors: list[tuple] = []
        self.metadata: dict = {}

    def row(self, table: str, row: dict) -> None:
        f = self.files.get(table)
        if f is None:
            f = self.files[table] = open(self.dir / f"{table}.ndjson", "wb")
        f.write(dumps_line(row))

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        if len(self.errors) < self.MAX_STORED_ERRORS:
            self.errors.append((line_no, kind, message, (excerpt or "")[:500]))

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)

    def finish(self) -> None:
        for f in self.files.values():
            f.close()

    def load(self, con, run_id: str, file_id: int, original_name: str) -> None:
        """INSERT every staged table; must run inside the caller's transaction."""
        self.finish()
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
