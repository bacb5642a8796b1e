"""The DuckDB store: one folder holding the database, the raw files it was built from, and an inbox.

    <folder>/compilewatch.duckdb   (any name; the folder is the database file's parent)
    <folder>/raw/ab/<sha256>       every ingested file, byte for byte, so a later parser can re-ingest it
    <folder>/inbox/                collectors on other machines drop bundles here
    <folder>/tmp/<host>-<pid>/     one process's scratch: row batches, raw copies, unpacked archives
    <db>.lock                      flock: many readers or one writer, across processes and threads
    <db>.version                   bumped after every committed write; caches key on it
    <db>.waiting                   touched by a process while it waits for the flock (writes_held)

DuckDB allows one read-write process per database file and refuses (rather than waits for) a
conflicting open. Every user here — dashboard threads, the CLI, inbox ingest — therefore opens the
database only for the span of one unit of work, behind an flock that *waits*: shared for reads,
exclusive for writes. Readers never see a half-written file, because each file is ingested in one
transaction; a writer crashing mid-file leaves nothing behind (DuckDB rolls back on reopen).
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager, nullcontext
from functools import partial
from pathlib import Path

import duckdb

from compilewatch.core import settings
from compilewatch.core.errors import StoreBusyError, StoreCorruptError, StoreError
from compilewatch.store import FileClaim, run_rows, scratch, torn_block
from compilewatch.store.objects import Folder
from compilewatch.store.derived import after_migration, refresh_stale, stale_runs
from compilewatch.store.files import (applied_migrations, check_not_newer, claim_checks, held_reads,
                                      keep_raw, lock_timeout, migration_hint, migrations, quote, transactions)

WRITER_MEMORY = "64MB"
# The writer's other settings, measured on a 112 MB real trace (20 MB of compressed artifacts):
# - checkpoint_threshold: a commit past 8 MB checkpoints at once, its rows written to the database
#   file without going through the write-ahead log first; with the default (16 MB) they were
#   written to the log at commit and again at close (store step 0.66-0.71 -> 0.42-0.60 s). Smaller
#   commits go to the log until it passes 8 MB or the writer closes: at 1 MB, each sample bundle's
#   trace (1-4 MB) checkpointed every table at its commit, 70-170 ms each; a held writer's commits
#   over 88 files took 3.3-3.6 s in all at 1 MB and 0.8 s at 8 MB, the ingest 10.6-11.7 -> 8.5 s,
#   and a 112 MB trace or 105 MB text log ingested in the same time and memory either way.
# - no FSST: its analysis of every new string and blob column cost 0.08 s of that checkpoint, and
#   no column of the sample logs' or of that trace's store chose it (same file size without).
WRITER_CONFIG = {"threads": 1, "memory_limit": WRITER_MEMORY, "checkpoint_threshold": "8MB",
                 "disabled_compression_methods": "fsst"}
# A migration's backfill rebuilds whole tables in one transaction: DuckDB holds a table's uncommitted
# rows until a row group (122,880 rows) is full, wider than 64 MB for the day rollups' text columns
# on a team-year store. A migration runs once per store, so it may take more.
MIGRATION_MEMORY = "1GB"
# How long `writes_held` keeps the writer lock across files before letting waiting readers in (a
# dashboard page waits at most about this, plus one file's write).
HOLD_SECONDS = 2.0
# ... but only when another process waits for the lock (it says so in <db>.waiting, see _flock):
# with nobody waiting, letting go cost a refresh and a checkpoint at close each time, ~0.5 s every
# 2 s of a folder ingest. A waiter that cannot say so (a read-only folder) waits at most this.
MAX_HOLD_SECONDS = 30.0
# A process waiting for the lock tries again at least this often; after a hold, the writer leaves
# the lock free for longer than that before taking it again, so every waiting reader gets its turn
# (a writer that took it back at once would starve them: flock has no queue).
LOCK_POLL_S = 0.05
READERS_TURN_S = 2 * LOCK_POLL_S
# Torn blocks mended at one open before giving up: one kill tears at most the block being written.
MOST_TORN_BLOCKS = 4

log = logging.getLogger(__name__)


class _OwnWriterHeld(Exception):
    """A flock wait given up: this process's held writer has the lock (EmbeddedStore._flock)."""


class EmbeddedStore:
    """The embedded backend: one DuckDB file in a folder of its own (see the module docstring)."""

    backend = "duckdb"

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path).resolve()
        self.folder = self.db_path.parent
        self.location = Folder(self.folder)   # raw/ and inbox/, as a DuckLake data path's (store/objects.py)
        self.raw_dir = self.folder / "raw"
        self.inbox_dir = self.folder / "inbox"
        self.tmp_root = self.folder / "tmp"
        self.lock_path = self.db_path.with_name(self.db_path.name + ".lock")
        self.version_path = self.db_path.with_name(self.db_path.name + ".version")
        self.wal_path = self.db_path.with_name(self.db_path.name + ".wal")   # DuckDB's write-ahead log
        self.waiting_path = self.db_path.with_name(self.db_path.name + ".waiting")
        self._held = threading.local()   # reads_held: this thread's kept connection
        # writes_held: the writer connection kept across units of work, its flock and when it was
        # opened; the mutex makes one thread at a time use it (a DuckDB connection is not shared)
        self._writes_held = 0
        self._writer: tuple | None = None
        self._writer_mutex = threading.RLock()
        self._released_at = 0.0   # when the held writer last let the lock go (READERS_TURN_S)
        self._stale_pending = False   # the held writer marked runs whose derived facts it owes
        self._mark_at_hold: int | None = None   # <db>.waiting's mtime when the held writer took the lock
        # run_id -> the fields of its runs row that a claim on the held writer committed, with the
        # run's stale marker, since the writer last wrote anything else, refreshed or let go
        # (claim_file)
        self._claimed_runs: dict[str, dict] = {}

    @property
    def tmp_dir(self) -> Path:
        """This process's scratch folder (store/scratch.py): swept once the process is gone."""
        return scratch.process_dir(self.tmp_root)

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def open(cls, db_path: str | os.PathLike | None = None) -> "EmbeddedStore":
        """Create the folder and database if needed and apply pending migrations."""
        store = cls(Path(db_path or settings.get("db")))
        try:
            store.folder.mkdir(parents=True, exist_ok=True)
            store.raw_dir.mkdir(exist_ok=True)
            store.tmp_root.mkdir(exist_ok=True)
            scratch.sweep(store.tmp_root)  # what processes killed mid-ingest left behind
        except OSError as e:
            raise StoreError(f"cannot create the store folder {store.folder}: {e.strerror}",
                             "choose a writable path with --db or COMPILEWATCH_DB")
        store.migrate()
        return store

    def migrate(self) -> list[str]:
        if not self.db_path.exists():
            return self._create()
        # Cheap check under a shared lock first: the dashboard opens the store on every rerun.
        try:
            with self.read() as con:
                done, stale = applied_migrations(con), stale_runs(con)
        except StoreCorruptError as e:
            if e.torn is None:
                raise
            self._mend_torn_blocks()
            with self.read() as con:
                done, stale = applied_migrations(con), stale_runs(con)
        check_not_newer(done, str(self.db_path))
        pending = not set(done) >= {n for n, _ in migrations()}
        if not pending and not stale:
            return []
        with self.write() as con:
            applied = self._apply_migrations(con) if pending else []
            # runs a writer marked and was killed before refreshing (store/derived.py mark_stale)
            self._refresh_stale(con)
        return applied

    def _mend_torn_blocks(self) -> None:
        """Put right the checksums of blocks a killed writer left half written (store/torn_block.py),
        under the exclusive lock, until the database opens."""
        mended: list[tuple[torn_block.TornBlock, Path]] = []
        with self._flock(True, lock_timeout()):
            for _ in range(MOST_TORN_BLOCKS + 1):
                try:
                    con = duckdb.connect(str(self.db_path), read_only=True)
                    try:
                        if mended:
                            torn_block.read_whole(con)   # keep a mend only if every block then reads
                    finally:
                        con.close()
                    for torn, kept in mended:
                        log.warning("%s: mended the checksum of the block at byte %d, left half written by a "
                                    "process killed while writing it; its old bytes are kept in %s",
                                    self.db_path, torn.location, kept.name)
                    return
                except duckdb.Error as e:
                    torn = torn_block.TornBlock.from_error(str(e))
                    kept = torn_block.repair(self.db_path, torn) if torn is not None else None
                    if kept is None:
                        for done, kept_before in reversed(mended):
                            torn_block.restore(self.db_path, done, kept_before)
                        raise StoreCorruptError(f"cannot open {self.db_path}: {e}", torn=torn) from None
                    mended.append((torn, kept))
            raise StoreCorruptError(f"cannot open {self.db_path}: more than {MOST_TORN_BLOCKS} torn blocks")

    def _create(self) -> list[str]:
        """A new database is built under another name and renamed into place once every migration
        is in and checkpointed, so a process killed while creating it leaves no database rather
        than a half-made one. A half-made one could not be opened again: its write-ahead log holds
        ALTER TABLE runs ADD COLUMN, and DuckDB cannot replay that for a table with a function as a
        column default (runs.ingested_at DEFAULT current_timestamp): "Failure while replaying WAL
        file ... GetDefaultDatabase with no default database set", read-only or read-write."""
        with self._flock(True, lock_timeout()):
            if self.db_path.exists():          # another process created it while we waited
                return []
            building = self.db_path.with_name(self.db_path.name + ".creating")
            wal = building.with_name(building.name + ".wal")
            for left in (building, wal):       # from a creator killed before; the lock says it is gone
                left.unlink(missing_ok=True)
            con = duckdb.connect(str(building), config=WRITER_CONFIG)
            try:
                applied = self._apply_migrations(con)
            finally:
                con.close()
            if wal.exists():
                raise StoreError(f"creating {self.db_path} left a write-ahead log behind",
                                 "remove the .creating files beside it and run the command again")
            os.replace(building, self.db_path)
        self._bump_version()
        return applied

    def _apply_migrations(self, con) -> list[str]:
        """Every pending migration, each committed with its record, then a checkpoint: that folds
        them into the database file at once rather than leaving ALTER TABLEs in the write-ahead log,
        where a kill before the next checkpoint would make them unreplayable (see _create)."""
        applied = []
        con.execute("CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, "
                    "applied_at TIMESTAMP DEFAULT current_timestamp)")
        done = set(applied_migrations(con))
        con.execute(f"SET memory_limit = '{MIGRATION_MEMORY}'")
        for name, sql in migrations():
            if name in done:
                continue
            # Each migration commits together with its record, or not at all.
            con.execute("BEGIN")
            try:
                con.execute(sql)
                after_migration(con, name)   # backfill what the migration added, same transaction
                con.execute("INSERT INTO _migrations (name) VALUES (?)", [name])
                con.execute("COMMIT")
            except duckdb.Error as e:
                con.execute("ROLLBACK")
                raise StoreError(f"migration {name} failed: {e}", migration_hint(e))
            applied.append(name)
        if applied:
            con.execute("CHECKPOINT")
        con.execute(f"SET memory_limit = '{WRITER_MEMORY}'")
        return applied

    # -- locking -------------------------------------------------------------------------------
    @contextmanager
    def _flock(self, exclusive: bool, timeout: float, deadline: float | None = None, give_way: bool = False):
        """The store's flock, waited for until `deadline` (default: `timeout` from now). With
        `give_way`, raises _OwnWriterHeld when, during the wait, another thread of this process
        takes the held writer (writes_held): its lock is kept until that thread's next write or the
        end of its block, which may wait on this very thread (an ingest's hashing thread waited
        for it until the lock timeout), so read and write go through the held writer instead."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            deadline = time.monotonic() + timeout if deadline is None else deadline
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if give_way and self._writer is not None:
                        raise _OwnWriterHeld() from None
                    if time.monotonic() > deadline:
                        raise StoreBusyError(f"{self.db_path.name} stayed locked for {timeout:.0f} s")
                    self._say_waiting()
                    time.sleep(delay)
                    delay = min(delay * 2, LOCK_POLL_S)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _say_waiting(self) -> None:
        """Tell a writer that holds the lock across units of work (writes_held) that a process
        waits for it: touched on every try, so the writer finds its time changed since it took the
        lock (_someone_waits)."""
        try:
            fd = os.open(self.waiting_path, os.O_WRONLY | os.O_CREAT, 0o666)
            try:
                os.utime(fd)
            finally:
                os.close(fd)
        except OSError:
            pass   # a read-only folder: the writer lets go after MAX_HOLD_SECONDS anyway

    def _waiting_mark(self) -> int | None:
        try:
            return self.waiting_path.stat().st_mtime_ns
        except OSError:
            return None

    def _someone_waits(self) -> bool:
        """Whether a process touched <db>.waiting since this process took the writer lock: a change,
        not an age, so no clock is compared with the file system's."""
        return self._waiting_mark() != self._mark_at_hold

    def _lock_unless_own_writer(self, exclusive: bool, timeout: float, deadline: float) -> ExitStack | None:
        """The flock, held by the returned stack (the caller closes it), or None when this
        process's held writer took the lock during the wait (see _flock's `give_way`)."""
        stack = ExitStack()
        try:
            stack.enter_context(self._flock(exclusive, timeout, deadline, give_way=True))
        except _OwnWriterHeld:
            return None
        return stack

    def _connect(self, read_only: bool, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            try:
                # Writers: one thread (each DuckDB worker keeps its own buffers; two were slower here
                # too) and a 64 MB buffer limit, past which DuckDB writes a big transaction's rows
                # out instead of holding them: ingest RSS stays ~140 MB for 100 or 400 MB of text.
                return duckdb.connect(str(self.db_path), read_only=read_only,
                                      config={} if read_only else WRITER_CONFIG)
            except duckdb.IOException as e:
                torn = torn_block.TornBlock.from_error(str(e))
                if torn is not None:
                    raise StoreCorruptError(f"cannot open {self.db_path}: {e}", torn=torn) from None
                # A process that does not take our flock (an old version, a DuckDB shell) holds the file.
                if "lock" not in str(e).lower() or time.monotonic() > deadline:
                    raise StoreError(f"cannot open {self.db_path}: {e}", "close other programs using this database file")
                time.sleep(0.1)
            except duckdb.InternalException as e:
                if "replaying WAL" not in str(e):
                    raise
                raise StoreError(f"cannot open {self.db_path}: DuckDB cannot replay its write-ahead log "
                                 f"({str(e).splitlines()[0]})",
                                 f"the log holds the last writes before a crash; moving {self.wal_path.name} aside "
                                 "opens the store without them, and ingesting the same logs again stores them "
                                 "again") from None

    @contextmanager
    def read(self, timeout: float | None = None):
        """A read-only connection for one unit of work. Waits while a writer holds the store
        (up to `timeout` seconds; default: the lock_timeout setting). Inside `reads_held`, every read
        of this thread shares one connection."""
        timeout = lock_timeout() if timeout is None else timeout
        if not self.db_path.exists():
            raise StoreError(f"no database at {self.db_path}", "run `compilewatch ingest PATH` or open the dashboard once to create it")
        deadline = time.monotonic() + timeout
        while True:
            if self._writer is not None:
                with self._writer_mutex:
                    if self._writer is not None:
                        # this process holds the writer lock (writes_held): a shared flock would wait
                        # for it; a cursor of the writer's connection sees every committed write
                        if self._stale_pending and getattr(self._held, "depth", 0):
                            # a page render (reads_held) beside an upload sees no run whose facts lag
                            # its rows either; an ingest's own lookups do not need them refreshed
                            self._refresh_pending(self._writer[0])
                        cur = self._writer[0].cursor()
                        try:
                            yield cur
                        finally:
                            cur.close()
                        return
            held = self._held
            depth = getattr(held, "depth", 0)
            if depth and getattr(held, "con", None) is not None:
                break
            stack = self._lock_unless_own_writer(False, timeout, deadline)
            if stack is None:
                continue   # through the held writer, which took the lock while this waited
            try:
                con = self._connect(True, timeout)
            except BaseException:
                stack.close()
                raise
            if depth:
                held.con, held.stack = con, stack
                break
            try:
                yield con
            finally:
                try:
                    con.close()
                finally:
                    stack.close()
            return
        try:
            yield held.con
        except BaseException:
            self._release_held()   # a query that failed may leave the connection in any state
            raise

    def reads_held(self):
        """Every read of this thread in the block shares one connection, opened at the first read and
        closed at the end. Opening the database reads its catalog and block metadata: ~20 ms at
        100,000 runs, paid by each of a page's ~20 queries, and each new connection starts with
        cold buffers. Held reads keep the shared lock (writers wait for the block, one page render)
        and are given up whenever this thread writes (`write`)."""
        return held_reads(self._held, self._release_held)

    def _release_held(self) -> None:
        run_rows.forget_bounds()
        held = self._held
        con, stack = getattr(held, "con", None), getattr(held, "stack", None)
        held.con = held.stack = None
        try:
            if con is not None:
                con.close()
        finally:
            if stack is not None:
                stack.close()   # the shared flock

    @contextmanager
    def write(self, timeout: float | None = None, bump_version: bool = True):
        """The only read-write connection, for one unit of work; bumps data_version on success, unless
        the work only keeps what is derived from the data already there (the review per store
        version): the dashboard's caches of that data stay valid."""
        with self._unit_of_work(timeout, bump_version) as con:
            self._claimed_runs.clear()   # this work may change any run: claims look them up again
            yield con

    @contextmanager
    def _unit_of_work(self, timeout: float | None, bump_version: bool):
        """write()'s connection and lock, without forgetting what claims wrote (claim_file)."""
        timeout = lock_timeout() if timeout is None else timeout
        # A read connection this thread holds would block its own writer: the shared flock against
        # the exclusive one, and DuckDB refuses a read-write open beside a read-only one.
        self._release_held()
        deadline = time.monotonic() + timeout
        while True:
            with self._writer_mutex:
                # decided under the mutex: a writer held with no block left (its last block ended
                # between our check and our write) is let go after this write, not kept
                if self._writes_held or self._writer is not None:
                    if self._writer is None:
                        wait = self._released_at + READERS_TURN_S - time.monotonic()
                        if wait > 0:
                            time.sleep(wait)
                        stack = ExitStack()
                        try:
                            stack.enter_context(self._flock(True, timeout))
                            self._writer = (self._connect(False, timeout), stack, time.monotonic())
                            self._mark_at_hold = self._waiting_mark()   # read with the lock held
                        except BaseException:
                            stack.close()
                            raise
                    try:
                        yield self._writer[0]
                    except BaseException:
                        # a unit of work that failed may leave the connection in any state: the runs
                        # it marked stale are refreshed by the next writer or open (see migrate)
                        self.release_writes(refresh=False)
                        raise
                    if bump_version:
                        self._bump_version()
                    if self._writer is not None:
                        held_for = time.monotonic() - self._writer[2]
                        if not self._writes_held or held_for > MAX_HOLD_SECONDS or (
                                held_for > HOLD_SECONDS and self._someone_waits()):
                            self.release_writes()
                    return
            stack = self._lock_unless_own_writer(True, timeout, deadline)
            if stack is None:
                continue   # another thread's writes_held took the lock while this waited
            with stack:
                con = self._connect(False, timeout)
                try:
                    yield con
                finally:
                    con.close()
            if bump_version:
                self._bump_version()
            return

    @contextmanager
    def writes_held(self):
        """Units of work written in the block share one writer connection and keep the writer lock
        between them. Once it has been held HOLD_SECONDS and another process waits for it, the lock
        is let go after a write, and taken again by the next (after MAX_HOLD_SECONDS whether or not
        anyone is known to wait). Opening the database, and closing it (which checkpoints what the
        writes left in the log), cost ~0.2 s per file when each file's write opened and closed its
        own; for a folder of small bundles that was most of the ingest. Every write still commits on
        its own. Reads of this process in the block (another thread's, too) use the held
        connection: a shared flock would wait for our own exclusive one. Call ``release_writes``
        before a wait of unknown length (a large file's parse), so readers do not wait with it."""
        with self._writer_mutex:   # an upload's thread and another's may both hold writes
            self._writes_held += 1
        try:
            yield
        finally:
            with self._writer_mutex:
                self._writes_held -= 1
                if not self._writes_held:
                    self.release_writes()

    def release_writes(self, refresh: bool = True) -> None:
        """Refresh the derived facts of the runs the held writer connection marked stale (claim_file
        hands it out with FileClaim.refresh_later), close it, and let the writer lock go: readers of
        other processes, who get in only then, never see a run's facts lag its rows."""
        with self._writer_mutex:
            held, self._writer = self._writer, None
            if held is None:
                return
            con, stack, _ = held
            try:
                if refresh:
                    self._refresh_pending(con)
            finally:
                self._stale_pending = False
                self._claimed_runs.clear()   # other processes may write before the next hold
                try:
                    con.close()
                finally:
                    stack.close()
                    self._released_at = time.monotonic()

    def _refresh_pending(self, con) -> None:
        """The runs the held writer marked stale, refreshed now (under the writer mutex)."""
        if self._stale_pending:
            if self._refresh_stale(con):
                self._bump_version()
            self._stale_pending = False

    def _refresh_stale(self, con) -> int:
        """store.derived.refresh_stale in a transaction of its own. A failure is logged, not raised:
        the markers stay and the next writer or open refreshes them, and the rows are stored."""
        n = 0
        try:
            for attempt in transactions(lambda: nullcontext(con)):
                with attempt as c:
                    n = refresh_stale(c)
            self._claimed_runs.clear()   # the markers are gone: the next claim of a run marks it again
        except duckdb.Error as e:
            log.warning("%s: derived facts of changed runs not refreshed (%s); the next write or open "
                        "refreshes them", self.db_path, e)
            return 0
        return n

    # -- versions and raw files ------------------------------------------------------------------
    def _bump_version(self) -> None:
        tmp = self.version_path.with_name(self.version_path.name + f".{uuid.uuid4().hex}")
        tmp.write_text(uuid.uuid4().hex)
        tmp.replace(self.version_path)

    def data_version(self) -> str:
        """Changes after every committed write; a cache key for the dashboard."""
        try:
            return self.version_path.read_text()
        except FileNotFoundError:
            return "0"

    def keep_raw(self, src: Path) -> tuple[str, str, int]:
        return keep_raw(self.location, self.tmp_dir, src)

    def size_on_disk(self) -> dict:
        db = self.db_path.stat().st_size if self.db_path.exists() else 0
        wal = self.wal_path
        return {"database_bytes": db + (wal.stat().st_size if wal.exists() else 0),
                "raw_bytes": self.location.total_bytes("raw")}

    def maintain(self, expire_older_than_days: float = 7.0, orphan_min_age_s: float | None = None):
        """Checkpoint the database (folds the write-ahead log in, frees deleted rows' blocks) and
        delete orphaned raw copies (store/maintain.py). The retention is DuckLake's; unused here."""
        from compilewatch.store import maintain as m
        size = self.size_on_disk()["database_bytes"]
        with self.write() as con:
            con.execute("CHECKPOINT")
        orphans = m.delete_orphaned_raw(self, m.ORPHAN_MIN_AGE_S if orphan_min_age_s is None else orphan_min_age_s)
        return m.Maintained(self.backend, 1, 1, size, self.size_on_disk()["database_bytes"], orphans, ["checkpoint"])

    def close(self) -> None:
        pass

    # -- writing one unit of work ------------------------------------------------------------------
    def transactions(self, bump_version: bool = True):
        """One transaction under the writer lock, as store.files.transactions hands it out (the lock
        makes a retry needless)."""
        return transactions(lambda: self.write(bump_version=bump_version))

    def advance_file_ids(self, top: int) -> None:
        """Make the next file id larger than `top` (after rows were copied in). DuckDB sequences
        cannot be set, only advanced."""
        with self.write() as con:
            current = con.execute("SELECT nextval('file_id_seq')").fetchall()[0][0]
            if current < top:
                con.execute("SELECT max(nextval('file_id_seq')) FROM range(?)", [top - current]).fetchall()

    @contextmanager
    def attached(self, con, alias: str):
        """This store's database attached read-only to `con` (another store's connection) as `alias`,
        under this store's shared lock."""
        with self._flock(False, lock_timeout()):
            con.execute(f"ATTACH '{quote(str(self.db_path))}' AS {alias} (READ_ONLY)")
            try:
                yield
            finally:
                con.execute(f"DETACH {alias}")

    def next_file_id(self, con) -> int:
        """A new file id, from `con`, a connection of a unit of work that writes."""
        return con.execute("SELECT nextval('file_id_seq')").fetchall()[0][0]

    @contextmanager
    def rewrite_file(self):
        """The transactions a stored file's rows are written again in (reingest), as claim_file
        hands them out without its duplicate check: on the held writer, the run's derived facts are
        refreshed once when it lets go rather than in each file's transaction."""
        with self.write() as con:
            yield self._claim_on(con, run_exists=True)

    @contextmanager
    def claim_file(self, sha: str, run_id: str, bundled: bool):
        """The writer lock, held for the block: "is it stored already?" (another process may have
        won the race since the pipeline looked) and the write are one step. Yields a FileClaim whose
        one transaction runs on the locked connection. The DuckLake store does the same with claims.

        On the held writer, a run that a claim of this hold wrote with nothing else written since
        comes with the fields written then (FileClaim.run_written): a bundle's files carry the same
        manifest, so its second and later files leave the runs row and the run's stale marker as
        they are. An update and a marker per file were ~1 ms of the writer's ~12 ms a file (the
        sample bundles: 341 of 433 files not their run's first); the lookups are one statement."""
        with self._unit_of_work(None, True) as con:
            found, exists = claim_checks(con, sha, run_id, bundled)
            if found:
                yield FileClaim(stored_under=found)
                return
            claim = self._claim_on(con, file_id=self.next_file_id(con), run_exists=exists)
            if claim.refresh_later:
                claim.run_written = self._claimed_runs.get(run_id) if exists else None
                claim.committed = partial(self._claim_committed, run_id)
            yield claim

    def _claim_committed(self, run_id: str, run: dict | None) -> None:
        """A claim on the held writer committed `run` as run_id's fields, and its stale marker."""
        if run is not None:
            self._claimed_runs[run_id] = run

    def _claim_on(self, con, **fields) -> FileClaim:
        """A FileClaim whose one transaction runs on `con`, a connection of a unit of work that
        writes. On the held writer, the run's derived facts are refreshed once when it lets go."""
        held = self._writer is not None and con is self._writer[0]
        self._stale_pending |= held
        return FileClaim(transactions=lambda: transactions(lambda: nullcontext(con)), refresh_later=held, **fields)
