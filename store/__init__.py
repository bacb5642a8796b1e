"""The store: where every ingested row, raw file and derived fact lives, behind one interface.

Two backends implement `Store`: the embedded one (`embedded.py`: one DuckDB file, the default) and
the team store (`lake.py`: DuckLake, catalog in PostgreSQL, Parquet on a shared path). `open_store`
is the one factory; nothing else picks a backend. Both speak plain DuckDB SQL on the connections
they hand out, so the pipeline, the review and the pages run the same SQL on either.

Beside them: the migrations (`migrations/*.sql`, applied by `migrate`), what both backends share
(`files.py`: raw files, the transactions they hand out, the duplicate check), the per-run facts
derived from stored rows (`derived.py`), copy and stats across backends, per-process scratch
folders, the inbox's claims (`inbox.py`), and a throwaway local PostgreSQL for a team store on one
machine (`pglocal.py`). The store imports nothing above it: parsers and the pipeline live in
compilewatch.ingest and write through the interface.

Writing a parsed file: the pipeline asks for a claim and writes within the transactions it hands
out; the store never calls back into the pipeline::

    with store.claim_file(sha, run_id, bundled) as claim:      # the writer lock, or DuckLake claims
        if claim.stored_under is None:
            for attempt in claim.transactions():                # re-run when a commit lost a race
                with attempt as con:
                    ...                                         # rows, files row, run, derived facts

A stored file parsed again (reingest) is written within `store.rewrite_file()`'s transactions, the
same way without the duplicate check.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from compilewatch.core import settings

LAKE_PREFIX = "ducklake:postgres:"


def is_lake(db: str | os.PathLike | None) -> bool:
    """Whether `db` names a DuckLake team store rather than an embedded database file."""
    return isinstance(db, str) and db.startswith(LAKE_PREFIX)


@dataclass
class FileClaim:
    """One file's right to be stored, handed out by `Store.claim_file` and held until its block
    ends: no other process or host stores the same content meanwhile. `stored_under` is the run
    that holds the content already (nothing is to be written); otherwise the caller writes the
    file's rows inside `transactions()` (see store.files.transactions) under `file_id`, creating
    its run when `run_exists` is false. `refresh_later`: the run's derived facts are refreshed by
    the store after the transaction (store.derived.mark_stale), not inside it. `run_written`: the
    run's fields as an earlier claim wrote them, with its stale marker, when the store knows that
    nothing else was written since (a file whose run fields are the same leaves both as they are);
    the caller hands `committed` the run's fields once the transaction has committed."""

    stored_under: str | None = None
    file_id: int | None = None
    run_exists: bool = False
    refresh_later: bool = False
    transactions: Callable[[], Iterator[AbstractContextManager]] = field(default=lambda: iter(()), repr=False)
    run_written: dict | None = None
    committed: Callable[[dict | None], None] = field(default=lambda run: None, repr=False)


@runtime_checkable
class Store(Protocol):
    """What the pipeline, the review, the pages and the CLI may ask of a store."""

    backend: str        # "duckdb" | "ducklake"
    db_path: Any        # what the CLI and dashboard print and caches key on
    folder: Path        # raw/, inbox/ and tmp/ live under it
    raw_dir: Path
    inbox_dir: Path

    @property
    def tmp_dir(self) -> Path: ...

    def read(self, timeout: float | None = None) -> AbstractContextManager: ...
    def reads_held(self) -> AbstractContextManager: ...
    def write(self, timeout: float | None = None) -> AbstractContextManager: ...
    def writes_held(self) -> AbstractContextManager: ...
    def release_writes(self) -> None: ...
    def transactions(self) -> Iterator[AbstractContextManager]: ...
    def claim_file(self, sha: str, run_id: str, bundled: bool) -> AbstractContextManager[FileClaim]: ...
    def rewrite_file(self) -> AbstractContextManager[FileClaim]: ...
    def migrate(self) -> list[str]: ...
    def data_version(self) -> str: ...
    def keep_raw(self, src: Path) -> tuple[str, str, int]: ...
    def advance_file_ids(self, top: int) -> None: ...
    def attached(self, con, alias: str) -> AbstractContextManager: ...
    def size_on_disk(self) -> dict: ...
    def maintain(self, expire_older_than_days: float = 7.0, orphan_min_age_s: float | None = None) -> Any: ...
    def close(self) -> None: ...


def open_store(db: str | os.PathLike | None = None, data_path: str | os.PathLike | None = None) -> Store:
    """The store `db` names, created and migrated if needed: a file path (embedded DuckDB; default:
    the db setting) or `ducklake:postgres:<libpq connection string>` (DuckLake; Parquet and raw
    files under data_path, default: the data_path setting)."""
    db = os.fspath(db) if db is not None else None
    if is_lake(db):
        from compilewatch.store.lake import LakeStore
        return LakeStore.open(db, data_path or settings.get("data_path") or None)
    from compilewatch.store.embedded import EmbeddedStore
    return EmbeddedStore.open(db)
