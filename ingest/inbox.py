"""The shared inbox: collectors on other machines drop bundles into <store>/inbox/, and one or more
`compilewatch inbox` workers ingest them.

Protocol for writers: write under a name starting with "." (or ending in .tmp/.part) and rename it
into place when complete — a rename is atomic, so a worker never sees half a bundle. Workers claim
an entry by renaming it into inbox/.work/, so two workers never ingest the same entry; after ingest
it moves to inbox/done/ or inbox/failed/ (with <name>.error.txt saying why). Nothing is deleted.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from . import bundle as bundle_mod
from .loader import IngestReport, ingest_paths

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


def _move(src: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / src.name
    if dest.exists():
        dest = folder / f"{src.name}.{int(time.time() * 1000)}"
    src.rename(dest)
    return dest


def process_once(store) -> list[tuple[str, IngestReport]]:
    inbox = store.inbox_dir
    work = inbox / ".work"
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for entry in pending(inbox):
        claimed = work / f"{os.getpid()}-{entry.name}"
        try:
            entry.rename(claimed)
        except OSError:
            continue  # another worker took it
        report = ingest_paths(store, [claimed], source="inbox")
        original = claimed.with_name(entry.name)
        claimed.rename(original)
        if report.ok:
            _move(original, inbox / "done")
        else:
            moved = _move(original, inbox / "failed")
            reasons = [f"{f.name}: {f.message}" for f in report.files if f.status == "failed"]
            moved.with_name(moved.name + ".error.txt").write_text("\n".join(reasons) + "\n")
        results.append((entry.name, report))
    return results


def watch(store, interval: float = 5.0, on_result=None, stop_after: float | None = None) -> None:
    deadline = None if stop_after is None else time.monotonic() + stop_after
    while deadline is None or time.monotonic() < deadline:
        for name, report in process_once(store):
            if on_result:
                on_result(name, report)
        time.sleep(interval)
