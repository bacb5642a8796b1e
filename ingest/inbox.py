"""The shared inbox: collectors on other machines drop bundles into <store>/inbox/, and one or more
`compilewatch inbox` workers ingest them.

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
from pathlib import Path

from compilewatch.ingest import bundle as bundle_mod
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.results import FileResult, IngestReport
from compilewatch.store import scratch

_SKIP_SUFFIXES = (".tmp", ".part", ".error.txt")


def pending(inbox: Path) -> list[Path]:
    if not inbox.is_dir():
        return []
    out = []
    for p in sorted(inbox.iterdir(), key=lambda p: p.stat().st_mtime):
        if p.name.startswith(".") or p.name in ("done", "failed") or p.name.endswith(_SKIP_SUFFIXES):
            continue
        if p.is_dir() and not bundle_mod.is_bundle_dir(p):
            continue  # a folder still being filled: its manifest.json is written last
        out.append(p)
    return out


def _move(src: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = name or src.name
    dest = folder / name
    if dest.exists():
        dest = folder / f"{name}.{int(time.time() * 1000)}"
    src.rename(dest)
    return dest


def _claim_dir(work: Path) -> Path:
    return work / f"{scratch.host()}-{os.getpid()}"


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


_OLD_CLAIM = re.compile(r"^(?P<pid>\d+)-(?P<name>.+)$")


def process_once(store) -> list[tuple[str, IngestReport]]:
    inbox = store.inbox_dir
    recover(inbox)
    mine = _claim_dir(inbox / ".work")
    mine.mkdir(parents=True, exist_ok=True)
    results = []
    for entry in pending(inbox):
        claimed = mine / entry.name
        try:
            entry.rename(claimed)
        except OSError:
            continue  # another worker took it
        try:
            report = ingest_paths(store, [claimed], source="inbox")
            reasons = [f"{f.name}: {f.message}" for f in report.files if f.status == "failed"]
        except Exception as e:  # the watcher must outlive any one entry; the entry says why it failed
            report = IngestReport([FileResult(entry.name, "unknown", "failed", message=f"{type(e).__name__}: {e}")])
            reasons = [f"{entry.name}: {type(e).__name__}: {e}"]
        if report.ok:
            _move(claimed, inbox / "done")
        else:
            moved = _move(claimed, inbox / "failed")
            moved.with_name(moved.name + ".error.txt").write_text("\n".join(reasons) + "\n")
        results.append((entry.name, report))
    try:
        mine.rmdir()
    except OSError:
        pass
    return results


def watch(store, interval: float = 5.0, on_result=None, stop_after: float | None = None) -> None:
    deadline = None if stop_after is None else time.monotonic() + stop_after
    while deadline is None or time.monotonic() < deadline:
        for name, report in process_once(store):
            if on_result:
                on_result(name, report)
        time.sleep(interval)
