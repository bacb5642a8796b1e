"""First start: ingest sample_logs/ into an empty store, once.

Guarded by an flock next to the database, so concurrent sessions (or two dashboard processes)
ingest at most once; a marker file records that it happened, so a team that later empties its
store does not get the samples back. The loader dedupes by sha256 anyway.
"""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

MARKER = ".sample_logs_ingested"


def _sample_paths(sample_dir: Path) -> list[Path]:
    """The bundles and log files under sample_dir (top level; the loader walks bundle folders)."""
    if not sample_dir.is_dir():
        return []
    skip = {"README.md", "README", "NOTES.md"}
    return sorted(p for p in sample_dir.iterdir() if not p.name.startswith(".") and p.name not in skip)


def ensure_sample_data(store, sample_dir: Path) -> str | None:
    """Ingest sample_dir into store if the store has no runs and never got the samples.
    Returns a one-line summary for the UI, or None when nothing was done."""
    paths = _sample_paths(Path(sample_dir))
    marker = store.folder / MARKER
    if not paths or marker.exists():
        return None
    fd = os.open(store.folder / (MARKER + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a second session waits here, then sees the marker
        if marker.exists():
            return None
        with store.read() as con:
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        if runs:
            marker.write_text(json.dumps({"skipped": "store already had runs"}))
            return None
        from compilewatch.ingest.loader import ingest_paths

        report = ingest_paths(store, paths)
        results = list(getattr(report, "files", []) or [])
        stored = sum(1 for r in results if getattr(r, "status", "") in ("stored", "partial"))
        marker.write_text(json.dumps({"files": len(results), "stored": stored}))
        return f"First start: ingested {stored} of {len(results)} sample files from {sample_dir}."
    finally:
        os.close(fd)
