"""Parsed rows on their way into DuckDB: staged as newline-delimited JSON in bounded batch files per
table, then loaded with one INSERT per batch inside the store step's transaction."""
from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from compilewatch.ingest.jsonfast import dumps_line, loads
from compilewatch.ingest.records import moved_line

_columns_cache: dict[str, list[tuple[str, str]]] = {}


def table_columns(con, table: str) -> list[tuple[str, str]]:
    if table not in _columns_cache:
        # every table's at once: a query of information_schema costs ~6 ms however few rows it
        # returns, and a trace's rows go into eight tables
        rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                           "WHERE table_catalog = current_database() AND table_schema = 'main' "
                           "ORDER BY table_name, ordinal_position").fetchall()
        found: dict[str, list[tuple[str, str]]] = {}
        for t, column, data_type in rows:
            found.setdefault(t, []).append((column, data_type))
        _columns_cache.update(found)
        _columns_cache.setdefault(table, [])
    return _columns_cache[table]


# Columns a text file parsed in ranges numbers per range, moved on per batch file when loaded (see
# StagingSink.append): the recompile numbering and the line numbers.
MOVED = ("recompile_no", "line_no")


def values(cols, moved=()) -> str:
    """The SELECT list of a batch's INSERT. JSON has no bytes: a BLOB column is staged as base64
    text and decoded here; a column in `moved` (of MOVED) plus the offset of the batch file the row
    came from (parameters: for each such column, in the columns' order, the offsets, then the
    files, in the same order)."""
    return ", ".join(f"from_base64({c})" if t == "BLOB" else
                     f"{c} + coalesce(list_extract(?::INTEGER[], list_position(?::VARCHAR[], filename)), 0)"
                     if c in moved else c for c, t in cols)


_WRITE_BUFFER = 256 << 10   # per table being staged: a dozen of them at most
_PY_TYPES = {"INTEGER": int, "BIGINT": int, "DOUBLE": float, "BOOLEAN": bool}


class StagedValuesCoerced(Exception):
    """A staged batch held a value of the wrong type for its column and was coerced on disk; the
    transaction that tried to load it is gone and must run again."""


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
    """Parsed rows are staged as newline-delimited JSON outside the database, in batch files of at
    most ``batch_bytes`` each per table; the store step then loads each batch with one read_json
    INSERT, all inside the file's one transaction. Staging keeps the write lock short (parsing
    happens before it is taken) and the process free of pyarrow/pandas; the bounded batches keep
    memory flat in the file's size: no step holds more than one batch of one table, in Python or in
    DuckDB's read_json (a 1 GB trace's artifacts are a few hundred MB of staged rows). Table names
    are checked, and rows and errors counted, by the parse step (parsing.parse_into) before they get
    here. The sink is plain data between calls, so a worker process can stage a file's rows and
    hand the sink to the one process that writes (ingest/workers.py)."""

    MAX_STORED_ERRORS = 10_000  # every error is counted (Parsed.errors); a 2 GB binary file is still one problem
    # Measured on a 112 MB real trace (18 MB of staged artifact rows): loading them in one INSERT
    # adds 45 MB to the process's peak, in 8 MB batches 35 MB, in 2 MB batches 32 MB; per batch
    # costs a statement (a few ms), so 8 MB keeps both small.
    BATCH_BYTES = 8 << 20

    def __init__(self, tmp_dir: Path | None, batch_bytes: int | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="stage-", dir=tmp_dir))
        self.batch_bytes = batch_bytes or self.BATCH_BYTES
        self.batches: dict[str, list[str]] = {}   # table -> its batch files' names, in order
        self.errors: list[tuple] = []
        self.errors_not_kept: Counter = Counter()   # kind -> errors past MAX_STORED_ERRORS (counted, not kept)
        self.metadata: dict = {}
        self._open: dict[str, list] = {}           # table -> [open file, bytes written to it]
        # column of MOVED -> batch name -> what that column of its rows is moved on by (see append)
        self.offsets: dict[str, dict[str, int]] = {c: {} for c in MOVED}

    def part(self) -> "StagingSink":
        """A sink for one range of a file parsed in ranges, staged in a folder under this one's, whose
        batches ``append`` takes over (ingest/text_ranges.py)."""
        return StagingSink(self.dir)

    def row(self, table: str, row: dict) -> None:
        cur = self._open.get(table)
        if cur is None or cur[1] >= self.batch_bytes:
            cur = self._start_batch(table, cur)
        line = dumps_line(row)
        cur[0].write(line)
        cur[1] += len(line)

    def _start_batch(self, table: str, cur: list | None) -> list:
        if cur is not None:
            cur[0].close()
        names = self.batches.setdefault(table, [])
        names.append(f"{table}.{len(names)}.ndjson")
        # one row is one write: a large buffer makes that a memcpy, not a system call every few rows
        cur = self._open[table] = [open(self.dir / names[-1], "wb", buffering=_WRITE_BUFFER), 0]
        return cur

    def error(self, line_no: int, kind: str, message: str, excerpt: str = "") -> None:
        if len(self.errors) < self.MAX_STORED_ERRORS:
            self.errors.append((line_no, kind, message, (excerpt or "")[:500]))
        else:
            self.errors_not_kept[kind] += 1

    def meta(self, key: str, value) -> None:
        self.metadata.setdefault(key, value)

    def finish(self) -> None:
        for f, _ in self._open.values():
            f.close()
        self._open.clear()

    def mark(self) -> tuple[dict[str, int], int]:
        """A place in what was staged so far (the batches of each table, the errors), for
        ``append``: every row staged after it goes to a new batch file."""
        self.finish()
        return {t: len(names) for t, names in self.batches.items()}, len(self.errors)

    def append(self, part: "StagingSink", recompile_offset: int = 0, start=None, stop=None,
               line_offset: int = 0) -> None:
        """Take over the batches and errors of `part` (a sink staged in a folder under this one's)
        between its marks `start` and `stop` (None: its beginning, its end), after what this one
        holds, their rows' recompile_no moved on by `recompile_offset` and their rows' and errors'
        line numbers by `line_offset`: a range of a text file parsed on its own numbers its
        recompiles and its lines from 1 (ingest/text_ranges.py)."""
        part.finish()
        folder = part.dir.relative_to(self.dir)
        for table, names in part.batches.items():
            lo = start[0].get(table, 0) if start else 0
            hi = stop[0].get(table, 0) if stop else len(names)
            mine = self.batches.setdefault(table, [])
            for name in names[lo:hi]:
                mine.append(f"{folder}/{name}")
                for column, offset in (("recompile_no", recompile_offset), ("line_no", line_offset)):
                    if offset:
                        self.offsets[column][mine[-1]] = offset
        errors = part.errors[start[1] if start else 0:stop[1] if stop else len(part.errors)]
        if line_offset:
            errors = [(moved_line(n, line_offset), *rest) for n, *rest in errors]
        room = max(0, self.MAX_STORED_ERRORS - len(self.errors))
        self.errors.extend(errors[:room])
        self.errors_not_kept.update(kind for _, kind, _, _ in errors[room:])
        if stop is None:   # a part's errors past its own limit came after all it kept
            self.errors_not_kept.update(part.errors_not_kept)
        for key, value in part.metadata.items():
            self.meta(key, value)

    def replay(self, sink) -> None:
        """Hand every staged row (each table's in the order staged, the MOVED columns moved on as
        the load moves them), error and fact to `sink`: for a sink that cannot take a text log's
        ranges itself (see parse_in_ranges), what they hold put back together here."""
        self.finish()
        for table, names in self.batches.items():
            for name in names:
                moves = [(c, self.offsets[c][name]) for c in MOVED if name in self.offsets[c]]
                with open(self.dir / name, "rb") as f:
                    for line in f:
                        row = loads(line)
                        for column, offset in moves:
                            if row.get(column) is not None:
                                row[column] += offset
                        sink.row(table, row)
        for err in self.errors:
            sink.error(*err)
        for kind, n in self.errors_not_kept.items():
            for _ in range(n):
                sink.error(0, kind, "", "")
        for key, value in self.metadata.items():
            sink.meta(key, value)

    def __getstate__(self):
        self.finish()   # handed to another process: every batch is complete on disk
        return self.__dict__

    def load(self, con, run_id: str, file_id: int, original_name: str) -> None:
        """INSERT every staged batch; must run inside the caller's transaction."""
        self.finish()
        for table, names in self.batches.items():
            cols = [(c, t) for c, t in table_columns(con, table) if c not in ("run_id", "file_id")]
            spec = "{" + ", ".join(f"'{c}': '{'VARCHAR' if t == 'BLOB' else t}'" for c, t in cols) + "}"
            names_sql = ", ".join(c for c, _ in cols)

            for group in self._groups(names):
                paths = [str(self.dir / name) for name in group]
                # a column moved on by each batch's own offset, looked up by the file a row came from
                moved = [(c, [self.offsets[c].get(name, 0) for name in group]) for c, _ in cols
                         if c in MOVED and any(name in self.offsets[c] for name in group)]
                sql = (f"INSERT INTO {table} (run_id, file_id, {names_sql}) "
                       f"SELECT ?, ?, {values(cols, [c for c, _ in moved])} "
                       f"FROM read_json(?, format='newline_delimited', columns={spec}"
                       f"{', filename=true' if moved else ''})")
                self._load_batch(con, sql, cols, lambda ps, m=moved: [
                    run_id, file_id, *(v for _, offsets in m for v in (offsets, ps)), ps], paths)
        if self.errors:
            # one statement over column lists: executemany is a statement per row (~0.5 ms each,
            # 5 s for the 10,000 errors a damaged file may keep)
            line_nos, kinds, messages, excerpts = (list(col) for col in zip(*self.errors))
            con.execute("INSERT INTO ingest_errors SELECT ?, ?, ?, unnest(?), unnest(?), unnest(?), unnest(?)",
                        [run_id, file_id, original_name, line_nos, kinds, messages, excerpts])

    def _groups(self, names: list[str]):
        """The batches to load with one INSERT each: consecutive ones up to batch_bytes together (a
        text file parsed in ranges leaves many small batches; a statement each costs a few ms)."""
        group: list[str] = []
        size = 0
        for name in names:
            n = (self.dir / name).stat().st_size
            if group and size + n > self.batch_bytes:
                yield group
                group, size = [], 0
            group.append(name)
            size += n
        if group:
            yield group

    @staticmethod
    def _load_batch(con, sql: str, cols, params, paths: list[str]) -> None:
        import duckdb   # here, not at the top: summarize stages a text log parsed in ranges, and stores nothing
        try:
            con.execute(sql, params(paths)).fetchall()
        except (duckdb.ConversionException, duckdb.InvalidInputException) as e:
            # A parser emitted a value of the wrong type. The failed statement ended the file's
            # transaction (DuckDB aborts it on any error), so a second INSERT here could never
            # succeed: coerce the batches on disk, column by column, and have the caller run the
            # transaction again (store_file), which then loads them.
            for path in paths:
                fixed = path + ".fixed"
                with open(path, "rb") as fin, open(fixed, "wb") as fout:
                    for line in fin:
                        r = loads(line)
                        fout.write(dumps_line({c: _coerce(r.get(c), t) for c, t in cols}))
                Path(fixed).replace(path)
            raise StagedValuesCoerced(str(e)) from e

    def cleanup(self) -> None:
        self.finish()
        shutil.rmtree(self.dir, ignore_errors=True)
