"""The shared inbox: complete entries are ingested once, half-written ones are left alone."""
from __future__ import annotations

from compilewatch.ingest.bundle import Manifest, write_manifest
from compilewatch.ingest.inbox import pending, process_once


def _bundle(folder, run_id, manifest=True):
    folder.mkdir(parents=True)
    (folder / "bench.csv").write_text("dev,name,batch_size,speedup,abs_latency\ncuda,m,1,1.2,3.0\n")
    if manifest:
        write_manifest(folder, Manifest(run_id=run_id, model="m"))
    return folder


def test_inbox_ingests_complete_bundles_and_leaves_the_rest(store):
    inbox = store.inbox_dir
    _bundle(inbox / "run-a", "run-a")
    _bundle(inbox / "run-b", "run-b", manifest=False)      # still being written
    (inbox / ".run-c.tar.gz").write_bytes(b"partial")       # being copied in under a dot name
    (inbox / "broken.zip").write_bytes(b"not a zip")
    assert sorted(p.name for p in pending(inbox)) == ["broken.zip", "run-a"]
    results = dict(process_once(store))
    assert results["run-a"].ok and not results["broken.zip"].ok
    assert (inbox / "done" / "run-a").is_dir()
    assert "not a readable archive" in (inbox / "failed" / "broken.zip.error.txt").read_text()
    assert (inbox / "run-b").is_dir() and (inbox / ".run-c.tar.gz").exists()
    with store.read() as con:
        assert con.execute("SELECT run_id, source FROM runs").fetchall() == [("run-a", "inbox")]
    # A second pass finds nothing new and adds nothing.
    assert process_once(store) == []
