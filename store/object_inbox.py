"""The inbox on an object store (a data path of s3://bucket/prefix): the folder protocol of
store/inbox.py, with what S3 lacks done otherwise.

Writers upload an entry to <prefix>/inbox/<name> with one PUT (a multipart upload too appears only
once complete), so a worker never sees half of one; names starting with "." or ending in .tmp/.part
are left alone as on a folder. An entry is a file: a log, a bundle's archive or any archive; a
bundle as a folder of objects is not taken from an object store.

S3 has no rename, so a claim cannot be a move into a claim folder, and conditional writes
(If-None-Match) are not kept by every S3-compatible server (rclone's ignores them). A claim is
therefore held in the catalog's PostgreSQL: a lock on the entry's name taken without waiting
(LakeStore.try_hold), in a transaction this worker keeps open while it ingests. A second worker
skips the entry while the lock is held; one that gets the lock checks that the entry is still in the
inbox, since a worker settles it (receipt, then the entry moved to done/ or failed/) before it lets
go. A worker that dies lets go with its connection, on whatever host it ran: nothing is left to
recover, and the entry is taken again by the next pass; ingest is idempotent (a file's sha256), so
the retry stores exactly what the dead worker had not.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compilewatch.store.inbox import _KEPT, _SKIP_SUFFIXES, QUEUED, SETTLED

PREFIX = "inbox"


@dataclass(frozen=True)
class Waiting:
    """An entry seen in the inbox: its name, as a folder's entry is a Path with a name."""
    name: str
    mtime: float


class ObjectInbox:
    def __init__(self, store):
        self.store = store
        self.location = store.location
        self._held: dict[str, tuple] = {}   # a claimed entry's local copy -> (its lock, its name)

    def __str__(self) -> str:
        return self.location.uri(PREFIX)

    def recover(self) -> list:
        return []    # a dead worker's claim went with its connection (module docstring)

    def pending(self, folder_complete: Callable | None = None) -> list[Waiting]:
        out = []
        for e in self.location.entries(PREFIX):
            name = e.rel[len(PREFIX) + 1:]
            if "/" in name or name.startswith(".") or name in _KEPT or name.endswith(_SKIP_SUFFIXES):
                continue    # done/, failed/, receipts/, a folder's objects, an upload's temporary name
            out.append(Waiting(name, e.mtime))
        return sorted(out, key=lambda w: (w.mtime, w.name))

    def claim(self, entry: Waiting) -> Path | None:
        """The entry's local copy, held for this worker until settle or unclaim; None when another
        worker holds it or has settled it."""
        held = self.store.try_hold(f"inbox:{self.location.uri(PREFIX)}/{entry.name}")
        if held is None:
            return None
        try:
            folder = Path(tempfile.mkdtemp(prefix="inbox-", dir=self.store.tmp_dir))
            local = folder / entry.name
            try:
                self.location.download(f"{PREFIX}/{entry.name}", local)
            except FileNotFoundError:
                shutil.rmtree(folder, ignore_errors=True)
                held.release()   # settled by the worker that held it before us
                return None
        except BaseException:
            held.release()
            raise
        self._held[str(local)] = (held, entry.name)
        return local

    def write_receipt(self, name: str, receipt: dict) -> None:
        self.location.write_bytes(f"{PREFIX}/receipts/{name}.json", json.dumps(receipt, default=str).encode())

    def read_receipt(self, name: str) -> dict | None:
        try:
            return json.loads(self.location.read_bytes(f"{PREFIX}/receipts/{name}.json"))
        except FileNotFoundError:
            return None

    def clear_receipt(self, name: str) -> None:
        self.location.delete(f"{PREFIX}/receipts/{name}.json")

    def entry_state(self, name: str) -> str | None:
        """QUEUED while the entry is in the inbox (a worker ingesting it leaves it there until it is
        settled: its claim is a lock, not a place), SETTLED once its receipt is written, else None."""
        for _ in range(2):   # one that moves on between the two looks is seen in the next round
            if self.location.exists(f"{PREFIX}/{name}"):
                return QUEUED
            if self.location.exists(f"{PREFIX}/receipts/{name}.json"):
                return SETTLED
        return None

    def enqueue(self, staged: Path, name: str) -> bool:
        """Upload the complete file `staged` as entry `name` unless one of that name is queued or
        settled; `staged` is removed. Two processes queueing the same name at the same instant may
        both upload it: the same bytes under the same name, ingested once (the entry is one object)."""
        try:
            if self.entry_state(name) is not None:
                return False
            self.location.publish(f"{PREFIX}/{name}", staged)
            return True
        finally:
            staged.unlink(missing_ok=True)

    def settle(self, claimed: Path, failure: list[str] | None = None) -> None:
        """Move the entry to done/ or failed/ (with <name>.error.txt), then let go of it."""
        held, name = self._held.pop(str(claimed))
        try:
            folder = "done" if failure is None else "failed"
            dest = f"{PREFIX}/{folder}/{name}"
            if self.location.exists(dest):
                dest = f"{dest}.{int(time.time() * 1000)}"
            self.location.move(f"{PREFIX}/{name}", dest)
            if failure is not None:
                self.location.write_bytes(f"{dest}.error.txt", ("\n".join(failure) + "\n").encode())
        finally:
            self._drop(claimed, held)

    def unclaim(self, claimed: Path) -> None:
        """Let go of an entry untouched: it stays in the inbox for the next worker."""
        held, _ = self._held.pop(str(claimed))
        self._drop(claimed, held)

    def release(self) -> None:
        for key in list(self._held):
            self.unclaim(Path(key))

    @staticmethod
    def _drop(claimed: Path, held) -> None:
        shutil.rmtree(claimed.parent, ignore_errors=True)
        held.release()
