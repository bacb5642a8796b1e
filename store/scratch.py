"""Scratch space under the store's tmp/ folder: one folder per process, swept when its process is gone.

Ingest writes temporary files — row batches on their way into DuckDB, raw copies being hashed,
unpacked archives, uploads being received. A process killed with SIGKILL cannot clean up after
itself, so each process works in ``tmp/<host>-<pid>/`` and the next process to open the store
removes the folders of processes on this host that no longer run. The store's own disk is used
(not the system temp folder) so a big upload cannot fill a small /tmp, and a crash's leftovers are
found where the store lives. Nothing here takes a file lock, so the rule holds on any backend.
"""
from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import time
from pathlib import Path

_OWNED = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)$")
# Leftovers of older versions (stage-*, raw-* directly in tmp/) carry no owner: removed once this
# old, which no single file's ingest takes.
STALE_UNOWNED_S = 6 * 3600


def host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def process_dir(tmp_root: Path) -> Path:
    """This process's scratch folder under tmp_root, created on first use. Computed per call: a
    forked child gets its own."""
    d = Path(tmp_root) / f"{host()}-{os.getpid()}"
    if d not in _made:
        d.mkdir(parents=True, exist_ok=True)
        _made.add(d)
    return d


_made: set[Path] = set()


@atexit.register
def _remove_empty() -> None:
    # A clean exit leaves no empty folder behind; anything still inside waits for sweep().
    for d in _made:
        try:
            if d.name.endswith(f"-{os.getpid()}"):
                d.rmdir()
        except OSError:
            pass


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def owner_gone(name: str) -> bool:
    """True for a '<host>-<pid>' name of this host whose process no longer runs."""
    m = _OWNED.match(name)
    return bool(m) and m["host"] == host() and not alive(int(m["pid"]))


def sweep(tmp_root: Path, now: float | None = None) -> list[Path]:
    """Remove scratch left by dead processes of this host (and unowned leftovers older than
    STALE_UNOWNED_S). Returns what was removed. Safe beside running processes: a live owner's
    folder is never touched, and another host's folders are left to that host."""
    tmp_root = Path(tmp_root)
    if not tmp_root.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for entry in tmp_root.iterdir():
        if _OWNED.match(entry.name) and entry.is_dir():
            if not owner_gone(entry.name):
                continue
        else:
            try:
                if now - entry.stat().st_mtime < STALE_UNOWNED_S:
                    continue
            except FileNotFoundError:
                continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
