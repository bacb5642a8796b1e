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
is a duplicate), so the retry stores exactly what the killed worker had not. A worker told to stop
while it holds an entry puts it back itself (`unclaim`).

Every entry a worker settles leaves a receipt, inbox/receipts/<name>.json, written before the entry
leaves the claim folder: what was stored, as which runs, and what failed and why. The team server's
push endpoint queues what it receives with `enqueue` under a name made from the content's sha256,
and reads its state back with `entry_state`, so one content is queued once however often it is
pushed.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from compilewatch.store import scratch

_SKIP_SUFFIXES = (".tmp", ".part", ".error.txt")
_KEPT = ("done", "failed", "receipts")
QUEUED, INGESTING, SETTLED = "queued", "ingesting", "settled"
_OLD_CLAIM = re.compile(r"^(?P<pid>\d+)-(?P<name>.+)$")


def pending(inbox: Path, folder_complete: Callable[[Path], bool]) -> list[Path]:
    """The entries waiting in `inbox`, oldest first: files and archives, and the folders
    `folder_complete` accepts (a folder is written in place, its manifest last)."""
    if not inbox.is_dir():
        return []
    out = []
    for p in sorted(inbox.iterdir(), key=lambda p: p.stat().st_mtime):
        if p.name.startswith(".") or p.name in _KEPT or p.name.endswith(_SKIP_SUFFIXES):
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


def unclaim(inbox: Path, claimed: Path) -> Path:
    """Put a claimed entry back into the inbox, untouched (a worker told to stop mid-entry)."""
    return _move(claimed, inbox)


def write_receipt(inbox: Path, name: str, receipt: dict) -> Path:
    """Record what the ingest of entry `name` did (atomically: a reader sees all of it or none)."""
    folder = inbox / "receipts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    tmp = folder / f".{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(receipt, default=str))
    tmp.replace(path)
    return path


def read_receipt(inbox: Path, name: str) -> dict | None:
    try:
        return json.loads((inbox / "receipts" / f"{name}.json").read_text())
    except FileNotFoundError:
        return None


def clear_receipt(inbox: Path, name: str) -> None:
    """Forget entry `name`'s receipt, so that the same name may be queued again."""
    (inbox / "receipts" / f"{name}.json").unlink(missing_ok=True)


def entry_state(inbox: Path, name: str) -> str | None:
    """Where entry `name` stands: QUEUED (waiting in the inbox), INGESTING (a worker holds it),
    SETTLED (its receipt is written), or None (never queued, or its traces were cleared away)."""
    # Looked at in the order an entry moves, so one that moves on between two looks is seen in the
    # next; twice, for one put back (unclaim, recover) in between.
    for _ in range(2):
        if (inbox / name).exists():
            return QUEUED
        work = inbox / ".work"
        if work.is_dir() and any((owner / name).exists() for owner in work.iterdir()):
            return INGESTING
        if (inbox / "receipts" / f"{name}.json").exists():
            return SETTLED
    return None


def enqueue(inbox: Path, staged: Path, name: str) -> bool:
    """Move the complete file `staged` (on the inbox's filesystem) into the inbox as `name`, unless
    an entry of that name is queued, being ingested or settled already: then `staged` is removed.
    Returns whether it was queued. The link is atomic and never replaces an entry, so of two
    processes queueing the same name at once one wins."""
    try:
        if entry_state(inbox, name) is not None:
            return False
        inbox.mkdir(parents=True, exist_ok=True)
        try:
            os.link(staged, inbox / name)
        except FileExistsError:
            return False
        except OSError:
            # a shared filesystem without hard links: renamed into place after the look above, so
            # two pushes of the same bytes at the same instant may both be queued; the second's
            # files are then duplicates, stored once all the same
            staged.rename(inbox / name)
        return True
    finally:
        staged.unlink(missing_ok=True)


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


class FolderInbox:
    """The protocol above as the inbox worker (compilewatch.ingest.inbox) drives it; an inbox on an
    object store offers the same (store/object_inbox.py)."""

    def __init__(self, inbox: Path):
        self.inbox = inbox

    def __str__(self) -> str:
        return str(self.inbox)

    def recover(self) -> list[Path]:
        return recover(self.inbox)

    def pending(self, folder_complete: Callable[[Path], bool]) -> list[Path]:
        return pending(self.inbox, folder_complete)

    def claim(self, entry: Path) -> Path | None:
        return claim(self.inbox, entry)

    def unclaim(self, claimed: Path) -> None:
        unclaim(self.inbox, claimed)

    def write_receipt(self, name: str, receipt: dict) -> None:
        write_receipt(self.inbox, name, receipt)

    def settle(self, claimed: Path, failure: list[str] | None = None) -> None:
        settle(self.inbox, claimed, failure)

    def release(self) -> None:
        release(self.inbox)

    def entry_state(self, name: str) -> str | None:
        return entry_state(self.inbox, name)

    def enqueue(self, staged: Path, name: str) -> bool:
        return enqueue(self.inbox, staged, name)

    def read_receipt(self, name: str) -> dict | None:
        return read_receipt(self.inbox, name)

    def clear_receipt(self, name: str) -> None:
        clear_receipt(self.inbox, name)


def for_store(store):
    """The inbox of `store`: a folder beside its raw copies, or a prefix of its object store."""
    if store.location.remote:
        from compilewatch.store.object_inbox import ObjectInbox
        return ObjectInbox(store)
    return FolderInbox(store.inbox_dir)
