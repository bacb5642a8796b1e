"""The dashboard process's one Store object per database, shared by the pages (ui.py) and the push
API (push_api.py): DuckDB refuses, within one process, a connection of another configuration to a
file already open (a read-only one beside the read-write one of an upload or the first start's
sample ingest), and one object keeps every connection of the process in step."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_open: dict[tuple[str, str | None], object] = {}


def shared(db: str, data_path: str | None):
    """The store `db` names (store.open_store), opened once per process."""
    key = (str(db), data_path)
    with _lock:
        if key not in _open:
            from compilewatch.store import open_store

            _open[key] = open_store(db, data_path)
        return _open[key]
