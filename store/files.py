"""What both backends share: the migrations, the raw-file folder (content-addressed copies of every
ingested file), the lock timeout, SQL quoting, the transactions they hand out and the questions a
file claim asks. Neither backend imports the other; both import this."""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from importlib import resources
from pathlib import Path

import duckdb

from compilewatch.core import settings
from compilewatch.core.errors import SchemaNewerError, StoreError


def lock_timeout() -> float:
    try:
        return settings.get_float("lock_timeout")
    except settings.SettingError as e:
        raise StoreError(str(e), "set it to a number of seconds") from None


def migrations() -> list[tuple[str, str]]:
    """(name, sql) for every migrations/NNN_*.sql, in order."""
    folder = resources.files("compilewatch.store.migrations")
    items = sorted((p.name, p.read_text(encoding="utf-8")) for p in folder.iterdir() if p.name.endswith(".sql"))
    return items


def applied_migrations(con) -> list[str]:
    """Names of the applied migrations; none on a store this code has not created yet."""
    try:
        return [r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()]
    except duckdb.CatalogException:
        return []


def check_not_newer(applied: list[str], where: str) -> None:
    """Refuse a store that a newer compilewatch migrated: its rows may mean what this code does not know."""
    unknown = sorted(set(applied) - {n for n, _ in migrations()})
    if unknown:
        raise SchemaNewerError(f"{where} has schema migrations this compilewatch does not know: {', '.join(unknown)}")


def migration_hint(e: Exception) -> str:
    """What to do about a migration that failed: out of memory is the machine's, not the store's."""
    if isinstance(e, duckdb.OutOfMemoryException):
        return ("the backfill of the new tables did not fit in memory: close other programs using "
                "this machine's memory and open the store again; nothing was changed")
    return "the store may be from a newer compilewatch, or its files were changed by another program"


def stage_raw(tmp_dir: Path, src: Path) -> tuple[str, Path, int]:
    """Copy src into tmp_dir and hash the copy. Returns (sha256, the copy, size).
    publish_raw moves the copy into raw/ once the file is going to be stored, so a file that is
    refused leaves nothing behind (the caller unlinks the copy). tmp_dir is the store's own, on
    the same filesystem as raw/, so the final rename is atomic."""
    tmp = tmp_dir / f"raw-{uuid.uuid4().hex}"
    try:
        # The kernel copies (sendfile): no bytes pass through this process, and the copy takes the
        # GIL once, not three times a MB, beside a parse that holds it. Reading, hashing and writing
        # a MB at a time cost that thread 1.8 CPU-s of a 1 GB log's ingest; the copy and the hash
        # of it below, 1.1. (A pipe raises shutil.SpecialFileError, an OSError: it cannot be read
        # twice, and the parse reads the file too.)
        shutil.copyfile(src, tmp)
        # The copy is hashed, not src: the stored bytes are the ones its name says, even where src
        # was still being written while it was copied.
        h = hashlib.sha256()
        size = 0
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        with open(tmp, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                h.update(view[:n])
                size += n
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return h.hexdigest(), tmp, size


def publish_raw(location, sha: str, staged: Path) -> str:
    """Publish a staged copy under raw/ of `location` (store/objects.py: a folder or an S3 prefix)
    by its sha256; returns its path relative to the location. Content-addressed, so a file kept
    twice (by any host) is stored once, and an orphan (a crash between this and the database commit)
    is harmless. The staged copy is gone afterwards."""
    rel = f"raw/{sha[:2]}/{sha}"
    location.publish_new(rel, staged)
    return rel


# Where the raw copies of each DuckLake store this process opened lie (a Location, store/objects.py),
# by the path DuckDB gives its database: a reader that holds only a connection (the deep dive reading
# an artifact out of its file's raw copy) finds them through it. An embedded store's are beside its
# database file.
_LOCATIONS: dict = {}


def register_folder(database_path: str, location) -> None:
    _LOCATIONS[database_path] = location


def location_of(con):
    """The Location whose raw/ holds the raw copies of the store `con` reads (its current database)."""
    from compilewatch.store.objects import Folder
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    path = row[0][0] if row else None
    loc = _LOCATIONS.get(path) if path else None
    if loc is None and path and os.path.isfile(path):
        loc = Folder(Path(path).parent)   # an embedded store: raw/ is beside its database file
    if loc is None:
        raise StoreError(f"no store folder is known for the database {path!r}",
                         "open the store with compilewatch (open_store) before reading raw copies through it")
    return loc


def keep_raw(location, tmp_dir: Path, src: Path) -> tuple[str, str, int]:
    """stage_raw then publish_raw: (sha256, path relative to the location, size)."""
    sha, staged, size = stage_raw(tmp_dir, src)
    return sha, publish_raw(location, sha, staged), size


def quote(s: str) -> str:
    """s inside single quotes in SQL (for ATTACH and the like, which take no parameters)."""
    return s.replace("'", "''")


# -- the transactions a store hands out -------------------------------------------------------------
def transactions(connect: Callable[[], AbstractContextManager], retryable: Callable[[Exception], bool] | None = None,
                 tries: int = 1) -> Iterator[AbstractContextManager]:
    """Attempts at one transaction, used as ::

        for attempt in transactions(...):
            with attempt as con:
                ...   # the writes, between BEGIN and COMMIT

    Each attempt opens a connection with `connect()`, runs the block in a transaction and commits
    it; a block or commit that raises rolls back. An error `retryable` accepts (a DuckLake commit
    that lost a race with another host's) is swallowed and the block runs again in a new attempt,
    up to `tries` in all; the last attempt's errors are raised. The iteration ends after the first
    commit. Nothing is held between attempts. The wait between attempts doubles (10 ms up to 0.5 s)
    and is drawn at random around that: hosts that lost one race together would otherwise come back
    in the same instant and race again."""
    delay = 0.01
    for attempt in range(tries):
        outcome: list[bool] = []
        yield _attempt(connect, retryable if attempt < tries - 1 else None, outcome)
        if outcome:
            return
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.5)


@contextmanager
def _attempt(connect, retryable, outcome: list):
    with connect() as con:
        con.execute("BEGIN")
        try:
            yield con
            con.execute("COMMIT")
        except duckdb.Error as e:
            rollback(con)
            if retryable is None or not retryable(e):
                raise
            return          # lost a race: swallowed, the next attempt runs the block again
        except BaseException:
            rollback(con)
            raise
        outcome.append(True)


def rollback(con) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass   # the transaction is gone already (the failed statement ended it)


# -- what a file claim asks -------------------------------------------------------------------------
def one(con, sql: str, params=None):
    """The first row of a query, or None."""
    # fetchall, not fetchone: DuckDB 2 keeps a partly fetched result open and refuses the next statement.
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def _stored_run_sql(bundled: bool) -> str:
    """The run holding a content (parameters sha256[, run_id]); a bundle's file only within its run."""
    if bundled:
        return "SELECT run_id FROM files WHERE sha256 = ? AND run_id = ? LIMIT 1"
    return "SELECT run_id FROM files WHERE sha256 = ? LIMIT 1"


def stored_run(con, sha: str, run_id: str, bundled: bool) -> str | None:
    """The run that already holds this content, if any (a bundle's file: only within its run)."""
    row = one(con, _stored_run_sql(bundled), [sha, run_id] if bundled else [sha])
    return row[0] if row else None


_RUN_EXISTS = "SELECT count(*) > 0 FROM runs WHERE run_id = ?"


def claim_checks(con, sha: str, run_id: str, bundled: bool) -> tuple[str | None, bool]:
    """What a file's claim asks once it holds the claim, in one statement: (stored_run, does the run exist).
    One query, not two: on DuckLake each statement outside a transaction is a catalog snapshot of
    its own, with its own round trips to PostgreSQL."""
    found, exists = one(con, f"SELECT ({_stored_run_sql(bundled)}), ({_RUN_EXISTS})",
                        [sha, run_id, run_id] if bundled else [sha, run_id])
    return found, exists


@contextmanager
def held_reads(held, release: Callable[[], None]):
    """The block of a store's ``reads_held``: ``held`` (a threading.local) counts how deep this
    thread is in such blocks, so that nested ones end with the outermost, which calls ``release``
    to give up what the reads kept. Each run's file bounds are remembered inside (store/run_rows.py)."""
    from compilewatch.store import run_rows   # here: run_rows reads through this module's one()

    held.depth = getattr(held, "depth", 0) + 1
    try:
        with run_rows.bounds_remembered():
            yield
    finally:
        held.depth -= 1
        if not held.depth:
            release()
