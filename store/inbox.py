"""The shared inbox's folder protocol: collectors on other machines drop bundles into
<store>/inbox/, and one or more workers claim and settle them (the loop that ingests what it
claims is compilewatch.ingest.inbox).

Protocol for writers: write under a name starting with "." (or ending in .tmp/.part) and rename it
into place when complete — a rename is atomic, so a worker never sees half a bundle. Workers claim
an entry by renaming it into inbox/.work/, so two workers never ingest the same entry; after ingest
it moves to inbox/done/ or inbox/failed/ (with <name>.error.txt saying why). Nothing is deleted.

A claim is inbox/.work/<host>-<pid>/<name>: the entry keeps its own name (so stored file names
never carry the claim), and a worker that was killed mid-entry is recognised by its dead pid. Any
worker on the same host puts such an entry back into the inbox; ingest is idempotent (same sha256
is a duplicate), so the retry stores exactly what the killed worker had not.
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from compilewatch.store import scratch

_SKIP_SUFFIXES = (".tmp", ".part", ".error.txt")
_OLD_CLAIM = re.compile(r"^(?P<pid>\d+)-(?P<name>.+)$")


def pending(inbox: Path, folder_complete: Callable[[Path], bool]) -> list[Path]:
    """The entries waiting in `inbox`, oldest first: files and archives, and the folders
    `folder_complete` accepts (a folder is written in place, its manifest last)."""
    if not inbox.is_dir():
        return []
    out = []
    for p in sorted(inbox.iterdir(), key=lambda p: p.stat().st_mtime):
        if p.name.startswith(".") or p.name in ("done", "failed") or p.name.endswith(_SKIP_SUFFIXES):
            continue
        if p.is_dir() and not folder_complete(p):
            continue  # a folder still being filled
        out.append(p)
    return out


def claim(inbox: Path, entry: Path) -> Path | None:
    """Take `entry` for this process: its path under the claim folder, or None when another
    worker took it first."""
    mine = _claim_dir(inbox)
    mine.mkdir(parents=True, exist_ok=True)
    claimed = mine / entry.name
    try:
        entry.rename(claimed)
    except OSError:
        return None
    return claimed


def settle(inbox: Path, claimed: Path, failure: list[str] | None = None) -> Path:
    """Move a claimed entry to inbox/done/, or to inbox/failed/ with its reasons beside it in
    <name>.error.txt when `failure` is given. Returns where it went."""
    if failure is None:
        return _move(claimed, inbox / "done")
    moved = _move(claimed, inbox / "failed")
    moved.with_name(moved.name + ".error.txt").write_text("\n".join(failure) + "\n")
    return moved


def release(inbox: Path) -> None:
    """Remove this process's (empty) claim folder."""
    try:
        _claim_dir(inbox).rmdir()
    except OSError:
        pass


def recover(inbox: Path) -> list[Path]:
    """Put entries claimed by dead workers of this host back into the inbox; returns them."""
    work = inbox / ".work"
    if not work.is_dir():
        return []
    back = []
    for owner in sorted(work.iterdir()):
        if owner.is_dir() and scratch.owner_gone(owner.name):
            for entry in sorted(owner.iterdir()):
                back.append(_move(entry, inbox))
            try:
                owner.rmdir()
            except OSError:
                pass
        elif (m := _OLD_CLAIM.match(owner.name)) and not scratch.alive(int(m["pid"])):
            back.append(_move(owner, inbox, m["name"]))  # claimed by a version that prefixed the pid
    return back


def _claim_dir(inbox: Path) -> Path:
    return inbox / ".work" / f"{scratch.host()}-{os.getpid()}"


def _move(src: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = name or src.name
    dest = folder / name
    if dest.exists():
        dest = folder / f"{name}.{int(time.time() * 1000)}"
    src.rename(dest)
    return dest
