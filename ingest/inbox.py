"""The inbox worker: ingest what collectors dropped into <store>/inbox/. The folder protocol
(writers, claims, done/ and failed/, recovering a dead worker's claims) is the store's:
compilewatch.store.inbox; this is the loop that claims entries and ingests them.
"""
from __future__ import annotations

import time
from pathlib import Path

from compilewatch.ingest import bundle as bundle_mod
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.results import FileResult, IngestReport
from compilewatch.store import inbox as claims


def pending(inbox: Path) -> list[Path]:
    """The entries ready to ingest: a folder is ready once it is a bundle (its manifest.json is
    written last)."""
    return claims.pending(inbox, bundle_mod.is_bundle_dir)


def process_once(store) -> list[tuple[str, IngestReport]]:
    """One pass: put dead workers' claims back, then claim and ingest each waiting entry.
    Returns (entry name, its IngestReport) per entry this worker took."""
    inbox = store.inbox_dir
    claims.recover(inbox)
    results = []
    for entry in pending(inbox):
        claimed = claims.claim(inbox, entry)
        if claimed is None:
            continue  # another worker took it
        try:
            report = ingest_paths(store, [claimed], source="inbox")
            reasons = [f"{f.name}: {f.message}" for f in report.files if f.status == "failed"]
        except Exception as e:  # the watcher must outlive any one entry; the entry says why it failed
            report = IngestReport([FileResult(entry.name, "unknown", "failed", message=f"{type(e).__name__}: {e}")])
            reasons = [f"{entry.name}: {type(e).__name__}: {e}"]
        claims.settle(inbox, claimed, None if report.ok else reasons)
        results.append((entry.name, report))
    claims.release(inbox)
    return results


def watch(store, interval: float = 5.0, on_result=None, stop_after: float | None = None) -> None:
    """process_once every `interval` seconds, calling on_result(name, report) per entry, until
    `stop_after` seconds have passed (None: for ever)."""
    deadline = None if stop_after is None else time.monotonic() + stop_after
    while deadline is None or time.monotonic() < deadline:
        for name, report in process_once(store):
            if on_result:
                on_result(name, report)
        time.sleep(interval)
