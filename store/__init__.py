"""The store: where every ingested row, raw file and derived fact lives, behind one interface.

Two backends implement `Store`: the embedded one (`embedded.py`: one DuckDB file, the default) and
the team store (`lake.py`: DuckLake, catalog in PostgreSQL, Parquet on a shared path). `open_store`
is the one factory; nothing else picks a backend. Both speak plain DuckDB SQL on the connections
they hand out, so the pipeline, the review and the pages run the same SQL on either.

Beside them: the migrations (`migrations/*.sql`, applied by `migrate`), what both backends share
(`files.py`), the per-run facts derived from stored rows (`derived.py`), copy and stats across
backends, per-process scratch folders, and a throwaway local PostgreSQL for a team store on one
machine (`pglocal.py`). The store imports nothing above it: parsers and the pipeline live in
compilewatch.ingest and write through the interface.
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from compilewatch.core import settings

LAKE_PREFIX = "ducklake:postgres:"


def is_lake(db: str | os.PathLike | None) -> bool:
    """Whether `db` names a DuckLake team store rather than an embedded database file."""
    return isinstance(db, str) and db.startswith(LAKE_PREFIX)


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
    def write(self, timeout: float | None = None) -> AbstractContextManager: ...
    def transaction(self, body: Callable) -> Any: ...
    def store_file(self, sha: str, run_id: str, bundled: bool, body: Callable, existing: Callable) -> str | None: ...
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
