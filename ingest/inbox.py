"""The inbox worker: ingest what collectors dropped into <store>/inbox/. The folder protocol
(writers, claims, done/ and failed/, receipts, recovering a dead worker's claims) is the store's:
compilewatch.store.inbox; this is the loop that claims entries and ingests them.

A worker told to stop (KeyboardInterrupt, which `compilewatch inbox --watch` raises for SIGINT and
SIGTERM alike) stops where it is: the ingest in progress is rolled back by the exception leaving its
transaction, and the entry it held goes back into the inbox for the next worker.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict
from pathlib import Path

from compilewatch.ingest import bundle as bundle_mod
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.results import FileResult, IngestReport
from compilewatch.store import inbox as claims

_RECEIPT_FIELDS = ("name", "kind", "status", "run_id", "records", "errors", "message", "size_bytes")


def pending(inbox: Path) -> list[Path]:
    """The entries ready to ingest: a folder is ready once it is a bundle (its manifest.json is
    written last)."""
    return claims.pending(inbox, bundle_mod.is_bundle_dir)


def receipt(report: IngestReport) -> dict:
    """What an entry's receipt holds: every file's outcome, as the CLI's ingest table shows it."""
    return {"ok": report.ok,
            "files": [{k: v for k, v in asdict(f).items() if k in _RECEIPT_FIELDS} for f in report.files]}


def process_once(store, stop: threading.Event | None = None, on_result=None) -> list[tuple[str, IngestReport]]:
    """One pass: put dead workers' claims back, then claim and ingest each waiting entry, until
    `stop` is set. Returns (entry name, its IngestReport) per entry this worker took, and calls
    on_result(name, report) as each is settled: a worker stopped later in the pass (its held
    writes' refresh included) has still said what it settled."""
    inbox = claims.for_store(store)   # a folder or an object store's prefix: the same steps
    inbox.recover()
    results = []
    try:
        for entry in inbox.pending(bundle_mod.is_bundle_dir):
            if stop is not None and stop.is_set():
                break
            claimed = inbox.claim(entry)
            if claimed is None:
                continue  # another worker took it
            try:
                report = ingest_paths(store, [claimed], source="inbox")
                reasons = [f"{f.name}: {f.message}" for f in report.files if f.status == "failed"]
            except KeyboardInterrupt:
                inbox.unclaim(claimed)   # told to stop: the entry waits for the next worker
                raise
            except Exception as e:  # the watcher must outlive any one entry; the entry says why it failed
                report = IngestReport([FileResult(entry.name, "unknown", "failed", message=f"{type(e).__name__}: {e}")])
                reasons = [f"{entry.name}: {type(e).__name__}: {e}"]
            # the receipt before the entry leaves the claim folder: whoever asks sees one or the other
            inbox.write_receipt(entry.name, receipt(report))
            inbox.settle(claimed, None if report.ok else reasons)
            results.append((entry.name, report))
            if on_result:
                on_result(entry.name, report)
    finally:
        inbox.release()
    return results


def watch(store, interval: float = 5.0, on_result=None, stop_after: float | None = None,
          stop: threading.Event | None = None, after_pass=None) -> None:
    """process_once every `interval` seconds, calling on_result(name, report) per entry as it is
    settled and after_pass(results) once a pass that took entries has ended, until `stop_after`
    seconds have passed (None: for ever) or `stop` is set."""
    stop = stop or threading.Event()
    deadline = None if stop_after is None else time.monotonic() + stop_after
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        results = process_once(store, stop, on_result)
        if after_pass and results:
            after_pass(results)
        stop.wait(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
