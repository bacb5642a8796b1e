"""The team store: DuckLake, with its catalog in PostgreSQL and its data as Parquet under a shared path.

    --db ducklake:postgres:<libpq connection string>   e.g. ducklake:postgres:dbname=compilewatch host=db1
    --data-path DIR | s3://BUCKET/PREFIX               shared by every host:
        DIR/lake/        the Parquet files DuckLake writes
        DIR/raw/ab/<sha256>, DIR/inbox/, DIR/tmp/      as in the embedded store's folder
    On object storage (store/objects.py) lake/, raw/ and inbox/ are prefixes of the bucket, DuckDB
    reaches the Parquet through its httpfs extension, and tmp/ stays on each host.

Every client is plain DuckDB with the ducklake and postgres extensions, so every query and the
ingest SQL run unchanged; only the few things DuckLake lacks are handled here:

- No PRIMARY KEY, UNIQUE, sequences or ON CONFLICT: the migrations are translated (`ducklake_sql`),
  file ids come from a PostgreSQL sequence, and "each file once" rests on claims.
- Claims: a PostgreSQL table with a primary key (`compilewatch_claims.key`), written through the
  postgres extension in a PostgreSQL transaction that stays open until the DuckLake commit of the
  rows it guards. A second host inserting the same key waits on that row (PostgreSQL's own unique
  check), then either fails with a duplicate key (the first committed: the file is stored) or goes
  on (the first rolled back or died: its connection closing rolled the claim back). A claim is
  committed only after the rows it guards, so a crash between the two leaves rows without a claim,
  never a claim without rows; the check of the files table made after claiming covers that case.
  A file's claim, its run's claim and its file id are one round trip: a PostgreSQL function
  (`compilewatch_claim_file`) inserts both keys and takes the id from the sequence.
- Files are written one host at a time: the same call takes a transaction-level advisory lock,
  released with the claims after the rows' DuckLake commit. Hosts still parse in parallel; their
  writes would otherwise conflict in DuckLake's catalog (a file's rollups update rows of tables
  every other file updates too) and be written again, each retry with all of its round trips.
- Conflicting DuckLake commits (two hosts appending to or updating one table in the same instant)
  are retried with the claims still held, so a retry cannot let a duplicate in.
- A run's derived facts (store/derived.py) are refreshed once for the files a process writes in a
  row (`writes_held`), not in each file's transaction: every statement of a refresh on DuckLake
  reads its table's catalog and writes Parquet and delete files, and a bundle's five files each
  refreshing its run were three quarters of its ingest. Each file's transaction marks its run
  (stale_runs); the marked runs are refreshed, under the write lock, when the block ends, before a
  wait for a parse (`release_writes`), and before a file of another run once marks are
  REFRESH_AFTER_S old (never between two files of one run: under contention for the write lock every
  file would come after that and refresh). Another host's reader may see a run's newest rows before
  its facts for about that long, or while one run's files are written, as it may see a bundle's
  first files before its last; a refresh reads every marker, so one left by a killed process is
  refreshed by the next process that writes.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

import duckdb

from compilewatch.core.errors import (CatalogConflictError, StoreError, StoreLoginError,
                                      StoreUnreachableError)
from compilewatch.store import LAKE_PREFIX as PREFIX
from compilewatch.store import FileClaim, objects, run_rows, scratch
from compilewatch.store.derived import after_migration, refresh_stale
from compilewatch.store.files import (applied_migrations, check_not_newer, claim_checks, held_reads,
                                      keep_raw, migration_hint, migrations, quote, register_folder, rollback,
                                      stored_run, transactions)

CLAIMS = "compilewatch_claims"
# pg_advisory_xact_lock key under which a store's catalog is created and migrated: PostgreSQL itself
# queues every other process on it, so N hosts starting on a brand-new store take turns.
INIT_LOCK_KEY = 0x636F6D70  # "comp"
# pg_advisory_xact_lock key a host holds while it writes one file's rows (module docstring)
WRITE_LOCK_KEY = 0x636F6D71  # "comq"
# the first key of try_hold's two-key advisory locks ("inbx")
HOLD_LOCK_CLASS = 0x696E6278
FILE_ID_SEQ = "compilewatch_file_id"
CLAIM_FILE = "compilewatch_claim_file"
# What the claims live in, beside DuckLake's tables in the catalog database. claim_file's function
# does in one call what were three round trips per file (the file's claim, the run's claim, the id)
# and takes the write lock: NULL when a committed claim holds the file's key. Each INSERT waits on
# another host's uncommitted claim like a plain INSERT does; a unique_violation (not ON CONFLICT,
# which under the REPEATABLE READ the postgres extension uses raises a serialization failure
# instead) means it committed. The write lock is taken last, so its holder waits on nothing.
CLAIM_OBJECTS = f"""
CREATE TABLE IF NOT EXISTS {CLAIMS} (key text PRIMARY KEY, host text, pid integer, claimed_at timestamptz DEFAULT now());
CREATE SEQUENCE IF NOT EXISTS {FILE_ID_SEQ};
CREATE OR REPLACE FUNCTION {CLAIM_FILE}(file_key text, run_key text, claim_host text, claim_pid integer)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO {CLAIMS} (key, host, pid) VALUES (file_key, claim_host, claim_pid);
    EXCEPTION WHEN unique_violation THEN
        RETURN NULL;
    END;
    BEGIN
        INSERT INTO {CLAIMS} (key, host, pid) VALUES (run_key, claim_host, claim_pid);
    EXCEPTION WHEN unique_violation THEN
        NULL;   -- the run's creator committed: this file only fills its gaps
    END;
    PERFORM pg_advisory_xact_lock({WRITE_LOCK_KEY});
    RETURN nextval('{FILE_ID_SEQ}');
END $$;
"""
COMMIT_RETRIES = 50
# How long runs marked by held writes may wait for their refresh before a file of another run is
# written (module docstring): longer than a bundle's files take to write.
REFRESH_AFTER_S = 2.0

log = logging.getLogger(__name__)


def _begin_locked(con, key: int) -> None:
    """Begin a transaction on `con` and take PostgreSQL's transaction-level advisory lock `key` in
    it (through the attached catalog, `pg`): held until that transaction ends or the process dies."""
    con.execute("BEGIN")
    con.execute(f"CALL postgres_execute('pg', 'SELECT pg_advisory_xact_lock({int(key)})')")


def extension_path(package: str, name: str) -> str:
    """The .duckdb_extension file a `duckdb-extension-*` wheel ships for this DuckDB version: DuckDB's
    own extension download is not reachable from every host, the wheel is."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(f"the DuckDB extension package {package} is not installed",
                         "reinstall compilewatch (`pip install -e .`) to get the DuckLake backend")
    root = Path(list(spec.submodule_search_locations)[0]) / "extensions" / f"v{duckdb.__version__}"
    path = root / f"{name}.duckdb_extension"
    if not path.exists():
        raise StoreError(f"{package} has no {name} extension for DuckDB {duckdb.__version__}",
                         "install the duckdb-extension-* wheels of the same version as duckdb")
    return str(path)


def load_extensions(con, location: objects.Location | None = None) -> None:
    """The extensions a lake needs, from their wheels; for a data path on S3 also httpfs and the
    credentials of that location (store/objects.py)."""
    con.execute(f"LOAD '{extension_path('duckdb_extension_postgres_scanner', 'postgres_scanner')}'")
    con.execute(f"LOAD '{extension_path('duckdb_extension_ducklake', 'ducklake')}'")
    if location is not None and location.remote:
        con.execute(f"LOAD '{extension_path('duckdb_extension_httpfs', 'httpfs')}'")
        if secret := objects.duckdb_secret_sql(location):
            con.execute(secret)


# -- migrations on DuckLake ----------------------------------------------------------------------------
_COMMENT = re.compile(r"--[^\n]*")
_SEQUENCE = re.compile(r"CREATE\s+SEQUENCE\b[^;]*;", re.I)
_INDEX = re.compile(r"CREATE\s+(UNIQUE\s+)?INDEX\b[^;]*;", re.I)
_TABLE_CONSTRAINT = re.compile(r",\s*(CONSTRAINT\s+\w+\s+)?(PRIMARY\s+KEY|UNIQUE|FOREIGN\s+KEY)\s*\([^)]*\)"
                               r"(\s*REFERENCES\s+\w+\s*(\([^)]*\))?)?", re.I)
_COLUMN_CONSTRAINT = re.compile(r"\s+(PRIMARY\s+KEY|UNIQUE)\b(?!\s*\()|\s+REFERENCES\s+\w+\s*(\([^)]*\))?", re.I)


# The first line of a migration that only changes what DuckLake does not have (keys, indexes): on
# DuckLake it is recorded as applied and changes nothing.
EMBEDDED_ONLY = "-- embedded only:"


def ducklake_sql(sql: str) -> str:
    """A migration written for embedded DuckDB, as DuckLake takes it. DuckLake has NOT NULL and
    defaults but no keys, unique constraints, indexes or sequences; what they enforced on the embedded
    store is enforced here by claims (module docstring). This is the one place that knows it."""
    if sql.startswith(EMBEDDED_ONLY):
        return ""
    sql = _COMMENT.sub("", sql)
    sql = _SEQUENCE.sub("", sql)
    sql = _INDEX.sub("", sql)
    sql = _TABLE_CONSTRAINT.sub("", sql)
    return _COLUMN_CONSTRAINT.sub("", sql)


# -- connection strings ---------------------------------------------------------------------------------
def libpq(spec: str) -> str:
    return spec[len(PREFIX):]


def describe_target(spec: str) -> str:
    """host:port/dbname for messages, without a password."""
    parts = dict(re.findall(r"(\w+)=(\S+)", libpq(spec)))
    return f"{parts.get('host', 'localhost')}:{parts.get('port', '5432')}/{parts.get('dbname', '?')}"


_LOGIN_REFUSED = ("password authentication failed", "role ", "no pg_hba.conf entry", "does not exist",
                  "authentication", "permission denied for database")
_CATALOG_CONFLICT = ("duplicate key value", "already exists")


def _connection_error(spec: str, e: Exception) -> StoreError:
    """What actually failed, in words: a server that does not answer, a login it refused, or a
    catalog that another process was creating at the same moment, are different fixes."""
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    m = str(e).lower()
    where = describe_target(spec)
    if any(s in m for s in _CATALOG_CONFLICT):
        return CatalogConflictError(f"the team store's catalog at {where} changed under this process: {first}")
    if any(s in m for s in _LOGIN_REFUSED) and "could not connect" not in m and "connection refused" not in m:
        return StoreLoginError(f"PostgreSQL at {where} refused the connection: {first}")
    return StoreUnreachableError(f"cannot reach the team store's PostgreSQL at {where}: {first}")


def is_conflict(e: Exception) -> bool:
    """A DuckLake commit that lost a race with another host's commit; retrying is safe."""
    m = str(e).lower()
    return "conflict" in m or "concurrent" in m or "retry" in m


def is_duplicate_key(e: Exception) -> bool:
    return "duplicate key value" in str(e)


class LakeStore:
    """The DuckLake backend of the Store interface (compilewatch.store.Store)."""

    backend = "ducklake"

    def __init__(self, spec: str, data_path: str | os.PathLike):
        self.db_path = spec          # what the dashboard and CLI print and key caches on
        self.spec = spec
        # raw copies, the inbox and the Parquet data: under a folder or an S3 prefix (store/objects.py)
        self.location = objects.location(os.fspath(data_path))
        if self.location.remote:
            # scratch stays on this host: staged raw copies, unpacked archives, inbox entries being
            # ingested; DuckDB writes its Parquet to the bucket itself
            self.folder = objects.local_work_folder(self.location)
            self.data_dir, self.raw_dir, self.inbox_dir = (self.location.uri(d) for d in ("lake", "raw", "inbox"))
        else:
            self.folder = self.location.root
            self.data_dir, self.raw_dir, self.inbox_dir = (self.folder / d for d in ("lake", "raw", "inbox"))
        self.tmp_root = self.folder / "tmp"
        self._db = None
        self._db_lock = threading.Lock()
        self._held = threading.local()   # reads_held: this thread's cursor and data version
        # writes_held: how many blocks hold, since when the runs this process marked wait for a
        # refresh, and which they are (None: a reingest's, run unknown)
        self._holds_mutex = threading.Lock()
        self._holds = 0
        self._marked_since: float | None = None
        self._marked_runs: set = set()

    # -- opening --------------------------------------------------------------------------------------
    @classmethod
    def open(cls, spec: str, data_path: str | os.PathLike | None) -> "LakeStore":
        if not data_path:
            raise StoreError("a DuckLake store needs a data path for its Parquet and raw files",
                             "pass --data-path DIR or set COMPILEWATCH_DATA_PATH (a folder every host can reach)")
        store = cls(spec, data_path)
        if store.location.remote:
            store.location.check()   # credentials and bucket, before DuckDB's less telling errors
        try:
            for d in (store.data_dir, store.raw_dir, store.tmp_root):
                if isinstance(d, Path):
                    d.mkdir(parents=True, exist_ok=True)
            scratch.sweep(store.tmp_root)  # what this host's processes killed mid-ingest left behind
        except OSError as e:
            raise StoreError(f"cannot create the data path {store.folder}: {e.strerror}",
                             "choose a writable folder with --data-path or COMPILEWATCH_DATA_PATH")
        if store._ready():
            return store
        with store._init_lock():
            store._database()   # the first ATTACH of a fresh catalog creates DuckLake's own tables
            store.migrate()
        return store

    def _ready(self) -> bool:
        """True when the catalog exists and every migration is applied: the usual open (a dashboard's
        cold start, an ingest into a store in use) then skips the initialisation lock and the
        connection of its own it costs (half a second of a cold page). The lake is attached only
        once PostgreSQL shows DuckLake's tables, so this attach creates nothing; anything short of
        ready goes the locked way."""
        if self._database(create=False) is None:
            return False
        with self._cursor() as cur:
            done = applied_migrations(cur)
        check_not_newer(done, describe_target(self.spec))
        return set(done) >= {n for n, _ in migrations()}

    @contextmanager
    def _init_lock(self):
        """Held while this process creates or migrates the catalog: a PostgreSQL transaction-level
        advisory lock on a connection of its own, released when that transaction ends (or the
        process dies). DuckLake's and our own CREATE ... IF NOT EXISTS race in PostgreSQL's catalog
        (pg_type's unique index) when several processes initialise one store at once."""
        con = duckdb.connect()
        try:
            load_extensions(con)
            con.execute(f"ATTACH '{quote(libpq(self.spec))}' AS pg (TYPE postgres)")
            _begin_locked(con, INIT_LOCK_KEY)
        except duckdb.Error as e:
            con.close()
            raise _connection_error(self.spec, e) from None
        try:
            yield
        finally:
            try:
                con.execute("COMMIT")
            except duckdb.Error:
                pass
            con.close()

    @property
    def tmp_dir(self) -> Path:
        """This process's scratch folder (store/scratch.py), on the data path beside raw/."""
        return scratch.process_dir(self.tmp_root)

    def _database(self, create: bool = True):
        """One DuckDB instance per process with the lake and the catalog database attached; each unit of
        work gets its own cursor (cursors share attachments and are safe across threads). With
        create=False, None (and nothing kept) when the catalog has no DuckLake tables yet: attaching
        the lake would create them, which only the initialisation lock's holder may do."""
        with self._db_lock:
            if self._db is None:
                con = duckdb.connect(config={"threads": 2, "memory_limit": "1GB"})
                try:
                    load_extensions(con, self.location)
                    con.execute(f"ATTACH '{quote(libpq(self.spec))}' AS pg (TYPE postgres)")
                    if not create and not con.execute(
                            "SELECT * FROM postgres_query('pg', 'SELECT to_regclass(''public.ducklake_metadata'') "
                            "IS NOT NULL')").fetchall()[0][0]:
                        con.close()
                        return None
                    con.execute(f"ATTACH '{PREFIX}{quote(libpq(self.spec))}' AS lake "
                                f"(DATA_PATH '{quote(str(self.data_dir))}/')")
                    con.execute("USE lake")
                    register_folder(con.execute("SELECT path FROM duckdb_databases() "
                                                "WHERE database_name = 'lake'").fetchall()[0][0], self.location)
                except duckdb.Error as e:
                    con.close()
                    raise _connection_error(self.spec, e) from None
                self._db = con
            return self._db

    def _reset(self) -> None:
        """Drop the process's instance after a connection failure, so the next unit of work reconnects
        (PostgreSQL restarted: pages work again without restarting the dashboard)."""
        with self._db_lock:
            if self._db is not None:
                try:
                    self._db.close()
                except duckdb.Error:
                    pass
                self._db = None

    @contextmanager
    def _cursor(self):
        try:
            cur = _LakeConnection(self._database().cursor())
        except duckdb.Error as e:
            self._reset()
            raise _connection_error(self.spec, e) from None
        try:
            yield cur
        except (duckdb.IOException, duckdb.ConnectionException) as e:
            self._reset()
            raise _connection_error(self.spec, e) from None
        except duckdb.Error as e:
            if _looks_disconnected(e):
                self._reset()
                raise _connection_error(self.spec, e) from None
            raise
        finally:
            cur.close()

    @contextmanager
    def read(self, timeout: float | None = None):
        """A connection for one unit of work that reads. No lock: every DuckLake reader sees the last
        committed snapshot while others write. Inside `reads_held`, this thread's reads share one."""
        held = self._held
        if getattr(held, "depth", 0):
            if getattr(held, "cursor", None) is None:
                stack = ExitStack()
                cur = stack.enter_context(self._cursor())
                # One DuckLake transaction for the block: each statement outside one is a
                # transaction of its own, and each begins by asking PostgreSQL for the newest
                # snapshot and ends with a commit there (about a quarter of a run detail page's
                # catalog round trips). The block's reads also see one snapshot, the one its
                # data_version names. Read only: a write belongs in write() or transactions(),
                # which give the held cursor up first.
                stack.callback(rollback, cur)
                try:
                    cur.execute("BEGIN TRANSACTION READ ONLY")
                except BaseException:
                    stack.close()
                    raise
                held.stack, held.cursor = stack, _HeldLakeConnection(cur)
            try:
                yield held.cursor
            except BaseException:
                self._release_held()
                raise
            return
        with self._cursor() as cur:
            yield cur

    def reads_held(self):
        """Every read of this thread in the block shares one cursor, in one read-only transaction
        (one snapshot), and the store version and each run's file bounds (store/run_rows.py) are
        asked for once: on DuckLake each of those is a query through the PostgreSQL catalog
        (~10-20 ms), and a page asks ~20 times. Given up whenever this thread writes."""
        return held_reads(self._held, self._release_held)

    def _release_held(self) -> None:
        run_rows.forget_bounds()
        held = self._held
        stack = getattr(held, "stack", None)
        held.cursor = held.stack = held.version = None
        if stack is not None:
            stack.close()

    @contextmanager
    def write(self, timeout: float | None = None):
        """A connection for one unit of work that writes; callers that may race another host use
        `transactions` or `claim_file`, which retry conflicting commits."""
        self._release_held()
        with self._cursor() as cur:
            yield cur

    @contextmanager
    def writes_held(self):
        """Files written in the block mark their runs stale in their own transactions; the marked
        runs are refreshed once (module docstring), when the last block of this process ends at the
        latest. Nothing else is held: hosts coordinate through claims and the write lock."""
        with self._holds_mutex:
            self._holds += 1
        try:
            yield
        finally:
            with self._holds_mutex:
                self._holds -= 1
                last = not self._holds
            if last:
                self.release_writes()

    def release_writes(self) -> None:
        """Refresh the runs marked stale, now: before a wait of unknown length (a large file's parse)
        and at the end of the held writes."""
        with self._holds_mutex:
            marked, self._marked_since = self._marked_since, None
            self._marked_runs = set()
        if marked is not None:
            self._refresh_stale()

    def _refresh_stale(self) -> bool:
        """store.derived.refresh_stale in a transaction of its own, under the write lock. A failure is
        logged, not raised: the rows are stored, their markers stay, and the next refresh of any
        process (or `maintain`) takes them."""
        try:
            with self._write_lock():
                for attempt in self.transactions():
                    with attempt as con:
                        refresh_stale(con)
        except (duckdb.Error, StoreError) as e:
            log.warning("%s: derived facts of changed runs not refreshed (%s); the next write refreshes them",
                        describe_target(self.spec), e)
            return False
        return True

    @contextmanager
    def _write_lock(self):
        """The write lock files are written under (module docstring), for a block of this process: a
        PostgreSQL transaction-level advisory lock, held until the block ends."""
        with self._cursor() as cur:
            try:
                _begin_locked(cur, WRITE_LOCK_KEY)
                yield
            except BaseException:
                rollback(cur)
                raise
            # nothing was written on it: its commit only ends the transaction, and with it the lock
            # (a ROLLBACK would read as a lost race in PostgreSQL's statement log)
            cur.execute("COMMIT")

    def _refresh_later(self, run_id: str | None) -> bool:
        """Whether a file of `run_id` written now leaves its run's refresh to the held writes (then
        marked here). Before a file of another run, the runs marked REFRESH_AFTER_S ago or more are
        refreshed first (a long folder ingest); no claim of this thread is held yet."""
        with self._holds_mutex:
            if not self._holds:
                return False
            due = (self._marked_since is not None and run_id not in self._marked_runs
                   and time.monotonic() - self._marked_since >= REFRESH_AFTER_S)
        if due:
            self.release_writes()
        with self._holds_mutex:
            if self._marked_since is None:
                self._marked_since = time.monotonic()
            self._marked_runs.add(run_id)
        return True

    def transactions(self, bump_version: bool = True):
        """Attempts at one DuckLake transaction (store.files.transactions), each on a cursor of its
        own: one whose commit conflicts with another host's is rolled back and run again. Every
        commit is a new snapshot, so data_version moves whatever bump_version says."""
        self._release_held()
        return transactions(self._cursor, is_conflict, COMMIT_RETRIES)

    def _transactions_on(self, cur):
        return transactions(lambda: nullcontext(cur), is_conflict, COMMIT_RETRIES)

    # -- claims ---------------------------------------------------------------------------------------
    @contextmanager
    def claim(self, key: str):
        """Yields True with `key` claimed in PostgreSQL until the block ends (committed if it ends
        normally, rolled back otherwise), or False when a committed claim for it exists already.
        Waits while another host holds an uncommitted claim for the same key."""
        with self._cursor() as cur:
            cur.execute("BEGIN")
            try:
                cur.execute(f"INSERT INTO pg.public.{CLAIMS} (key, host, pid) VALUES (?, ?, ?)",
                            [key, os.uname().nodename, os.getpid()])
            except duckdb.Error as e:
                cur.execute("ROLLBACK")
                if is_duplicate_key(e):
                    yield False
                    return
                raise
            try:
                yield True
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def try_hold(self, key: str) -> "_Held | None":
        """Hold `key` for this process until the returned handle's release(), without waiting: None
        when another process holds it. A PostgreSQL transaction-level advisory lock (the two-key
        form, apart from the store's own one-key locks) in a transaction left open, so a process
        that dies lets go with its connection, on whatever host it ran. The inbox's claims on an
        object store (store/object_inbox.py)."""
        cur = _LakeConnection(self._database().cursor())
        try:
            cur.execute("BEGIN")
            got = cur.execute("SELECT * FROM postgres_query('pg', ?)", [
                f"SELECT pg_try_advisory_xact_lock({HOLD_LOCK_CLASS}, hashtext({_pg_literal(key)}))"]).fetchall()[0][0]
        except duckdb.Error as e:
            cur.close()
            raise _connection_error(self.spec, e) from None
        if not got:
            rollback(cur)
            cur.close()
            return None
        return _Held(cur)

    def advance_file_ids(self, top: int) -> None:
        """Make the next file id larger than `top` (after rows were copied in)."""
        with self._cursor() as cur:
            cur.execute("CALL postgres_execute('pg', ?)",
                        [f"SELECT setval('{FILE_ID_SEQ}', greatest({int(top)}, "
                         f"(SELECT last_value FROM {FILE_ID_SEQ})))"])

    @contextmanager
    def attached(self, con, alias: str):
        """This lake attached read-only to `con` (another store's connection) as `alias`."""
        load_extensions(con, self.location)
        con.execute(f"ATTACH '{PREFIX}{quote(libpq(self.spec))}' AS {alias} "
                    f"(DATA_PATH '{quote(str(self.data_dir))}/', READ_ONLY)")
        try:
            yield
        finally:
            con.execute(f"DETACH {alias}")

    @contextmanager
    def rewrite_file(self):
        """The transactions a stored file's rows are written again in (reingest): no claim, since
        the file is stored already; the run's derived facts refreshed in each of them, or once for
        the held writes (writes_held)."""
        yield FileClaim(run_exists=True, transactions=self.transactions, refresh_later=self._refresh_later(None))

    @contextmanager
    def claim_file(self, sha: str, run_id: str, bundled: bool):
        """The file's claim across every host, held for the block (module docstring). Yields a
        FileClaim: stored_under set when another host stored the content (its claim committed) or
        the files table holds it already (a host that died between its rows' commit and its
        claim's); else a file id and the transactions to write in, retried on a conflicting commit.
        Two statements before the write: the claim function (both claims and the id) and one query
        of the lake (claim_checks)."""
        self._release_held()
        refresh_later = self._refresh_later(run_id)   # before the claim: a refresh due now takes the write lock
        key = f"file:{run_id}:{sha}" if bundled else f"loose:{sha}"
        # The run's claim serialises the hosts creating one run: whoever comes later (its claim
        # committed) only fills gaps, as run_exists tells it.
        call = (f"SELECT {CLAIM_FILE}({_pg_literal(key)}, {_pg_literal(f'run:{run_id}')}, "
                f"{_pg_literal(os.uname().nodename)}, {os.getpid()})")
        with self._cursor() as cur:
            cur.execute("BEGIN")
            try:
                try:
                    file_id = cur.execute("SELECT * FROM postgres_query('pg', ?)", [call]).fetchall()[0][0]
                except duckdb.Error as e:
                    if f"function {CLAIM_FILE}" not in str(e) or "does not exist" not in str(e):
                        raise
                    rollback(cur)
                    self._add_claim_function()
                    cur.execute("BEGIN")
                    file_id = cur.execute("SELECT * FROM postgres_query('pg', ?)", [call]).fetchall()[0][0]
            except BaseException:
                rollback(cur)
                raise
            if file_id is None:
                rollback(cur)
                with self.read() as con:
                    found = stored_run(con, sha, run_id, bundled)
                yield FileClaim(stored_under=found or run_id)
                return
            try:
                with self.read() as con:
                    found, exists = claim_checks(con, sha, run_id, bundled)
                if found:
                    yield FileClaim(stored_under=found)
                else:
                    yield FileClaim(file_id=file_id, run_exists=exists, transactions=self.transactions,
                                    refresh_later=refresh_later)
            except BaseException:
                rollback(cur)
                raise
            cur.execute("COMMIT")

    def _add_claim_function(self) -> None:
        """A catalog created by a compilewatch from before the claim function gets it at its first
        claim, not at open: a dashboard only reads, with a login that may not create anything.
        Under the initialisation lock, since DDL on one object races between hosts."""
        with self._init_lock(), self._cursor() as cur:
            cur.execute("CALL postgres_execute('pg', ?)", [CLAIM_OBJECTS])

    # -- schema ---------------------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        wanted = migrations()
        with self._cursor() as cur:
            done = applied_migrations(cur)
            check_not_newer(done, describe_target(self.spec))
            if set(done) >= {n for n, _ in wanted}:
                return []
            cur.execute("CALL postgres_execute('pg', ?)", [CLAIM_OBJECTS])
        applied = []
        # Each step is claimed, so one host applies it while the others wait and then find it done.
        with self.claim("migration:_migrations") as mine, self._cursor() as cur:
            if mine:
                for attempt in self._transactions_on(cur):
                    with attempt as c:
                        c.execute("CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR NOT NULL, "
                                  "applied_at TIMESTAMP DEFAULT current_timestamp)")
        for name, sql in wanted:
            with self.claim(f"migration:{name}") as mine, self._cursor() as cur:
                if not mine or name in applied_migrations(cur):
                    continue
                try:
                    for attempt in self._transactions_on(cur):
                        with attempt as c:
                            if translated := ducklake_sql(sql):
                                c.execute(translated)
                            after_migration(c, name)
                            c.execute("INSERT INTO _migrations (name) VALUES (?)", [name])
                except duckdb.Error as e:
                    raise StoreError(f"migration {name} failed on DuckLake: {e}", migration_hint(e)) from None
                applied.append(name)
        return applied

    # -- versions and raw files -------------------------------------------------------------------------
    def data_version(self) -> str:
        """The latest DuckLake snapshot id: changes with every commit from any host. Inside
        `reads_held`, the one seen first."""
        held = self._held
        if getattr(held, "depth", 0) and getattr(held, "version", None) is not None:
            return held.version
        with self.read() as con:
            version = str(con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchall()[0][0])
        if getattr(held, "depth", 0):
            held.version = version
        return version

    def keep_raw(self, src: Path) -> tuple[str, str, int]:
        return keep_raw(self.location, self.tmp_dir, src)

    def size_on_disk(self) -> dict:
        out = {"data_bytes": self.location.total_bytes("lake"), "raw_bytes": self.location.total_bytes("raw")}
        try:
            with self.read() as con:
                out["catalog_bytes"] = con.execute(
                    "SELECT * FROM postgres_query('pg', 'SELECT pg_database_size(current_database())')").fetchall()[0][0]
        except (duckdb.Error, StoreError):
            out["catalog_bytes"] = None
        return out

    def maintain(self, expire_older_than_days: float = 7.0, orphan_min_age_s: float | None = None):
        """Refresh the runs a killed ingest left marked stale, merge adjacent Parquet files, expire
        snapshots older than the retention, delete the data files nothing references and orphaned
        raw copies (store/maintain.py). Safe beside ingests:
        each step is a DuckLake transaction, retried when it conflicts with another host's commit."""
        from compilewatch.store import maintain as m
        before = (m.parquet_files(self.location), self.location.total_bytes("lake"))
        steps = [("merge adjacent files", "CALL ducklake_merge_adjacent_files('lake')"),
                 ("expire snapshots", f"CALL ducklake_expire_snapshots('lake', older_than => now() - "
                                      f"INTERVAL '{float(expire_older_than_days) * 86400:.0f} seconds')"),
                 ("delete files of expired snapshots", "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)"),
                 ("delete orphaned data files", "CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)")]
        # runs a killed ingest marked stale (module docstring), before the files are merged
        done = ["refresh runs marked stale"] if self._refresh_stale() else []
        with self._cursor() as cur:
            for name, sql in steps:
                try:
                    # results through Arrow: their timestamptz columns would need pytz as Python rows
                    for attempt in self._transactions_on(cur):
                        with attempt as c:
                            c.execute(sql).to_arrow_table()
                    done.append(name)
                except duckdb.CatalogException:
                    pass    # a DuckLake version without this function: the others still run
        orphans = m.delete_orphaned_raw(self, m.ORPHAN_MIN_AGE_S if orphan_min_age_s is None else orphan_min_age_s)
        return m.Maintained(self.backend, before[0], m.parquet_files(self.location), before[1],
                            self.location.total_bytes("lake"), orphans, done)

    def close(self) -> None:
        self._reset()


class _Held:
    """What try_hold holds: the transaction its lock lives in."""

    def __init__(self, cur):
        self._cur = cur

    def release(self) -> None:
        if self._cur is not None:
            rollback(self._cur)    # nothing was written in it: ending it lets go of the lock
            self._cur.close()
            self._cur = None


class _LakeConnection:
    """A DuckDB connection whose default database is the lake, and whose cursors' is too: `USE` holds
    per connection, and the queries take a cursor of their own for each statement."""

    def __init__(self, con):
        self._con = con
        con.execute("USE lake")

    def cursor(self) -> "_LakeConnection":
        return _LakeConnection(self._con.cursor())

    def __getattr__(self, name):
        return getattr(self._con, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._con.close()


class _HeldLakeConnection:
    """The cursor a reads_held block shares, queries included: a query's own cursor (common.df)
    would be a new DuckDB connection, each with a `USE lake` before its statement; this thread's
    block is its only user. A query's close() leaves it open; the block closes it."""

    def __init__(self, cur: _LakeConnection):
        self._cur = cur

    def cursor(self) -> "_HeldLakeConnection":
        return self

    def close(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._cur, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _pg_literal(s: str) -> str:
    """s as a PostgreSQL string literal, for the text postgres_query sends (it takes no parameters).
    Run ids come from manifests: an escape string (E'...') with quotes and backslashes doubled means
    the same whatever the server's standard_conforming_strings."""
    return "E'" + s.replace("\\", "\\\\").replace("'", "''") + "'"


def _looks_disconnected(e: Exception) -> bool:
    m = str(e).lower()
    return any(s in m for s in ("connection", "could not connect", "server closed", "terminating", "no connection"))
