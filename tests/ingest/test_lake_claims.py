"""A file's claim on the DuckLake team store: one round trip to PostgreSQL (compilewatch_claim_file)
takes the file's claim, its run's claim and its file id, with the guarantees the claims always had.
Real PostgreSQL (tests/conftest.py), real stores and real bundles."""
from __future__ import annotations

import json
import re
import shutil
import tarfile
import threading
import time
from pathlib import Path

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.results import DUPLICATE, STORED
from compilewatch.store import open_store
from compilewatch.store.lake import CLAIM_FILE

REPO = Path(__file__).resolve().parents[2]
BUNDLE = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[0]
SHA = "0" * 64


def _dbname(spec: str) -> str:
    return re.search(r"dbname=(\S+)", spec).group(1)


def _claim_in_thread(store, sha: str, run_id: str) -> tuple[threading.Thread, dict]:
    got: dict = {}

    def take():
        with store.claim_file(sha, run_id, True) as claim:
            got["claim"] = claim
    t = threading.Thread(target=take)
    t.start()
    return t, got


def test_a_held_claim_makes_another_host_wait_then_yields_by_outcome(lake_store):
    """Host B asks for a file that host A holds: B waits while A's claim is open; when A's block fails
    (its claim rolled back) B gets the file with an id of its own; when A's block ends normally
    (its claim committed) B is told the content is stored."""
    other = open_store(lake_store.spec, lake_store.folder)   # a second DuckDB instance: another host
    try:
        with pytest.raises(RuntimeError):
            with lake_store.claim_file(SHA, "run-a", True) as first:
                assert first.stored_under is None and first.file_id is not None and not first.run_exists
                waiter, got = _claim_in_thread(other, SHA, "run-a")
                time.sleep(1.0)
                assert "claim" not in got          # still waiting on A's uncommitted claim
                raise RuntimeError("A dies mid-file")
        waiter.join(60)
        assert got["claim"].stored_under is None and got["claim"].file_id not in (None, first.file_id)

        with lake_store.claim_file("1" * 64, "run-b", True) as held:
            assert held.file_id is not None
            waiter, got = _claim_in_thread(other, "1" * 64, "run-b")
            time.sleep(1.0)
            assert "claim" not in got
        waiter.join(60)
        assert got["claim"].stored_under == "run-b" and got["claim"].file_id is None
    finally:
        other.close()


def test_hosts_write_one_file_at_a_time(lake_store):
    """A host holding a claim holds the store's write turn: another host's claim on a different file
    of a different run waits until the first host's block ends, then gets its own id."""
    other = open_store(lake_store.spec, lake_store.folder)
    try:
        with lake_store.claim_file("2" * 64, "run-c", True) as held:
            waiter, got = _claim_in_thread(other, "3" * 64, "run-d")
            time.sleep(1.0)
            assert "claim" not in got
        waiter.join(60)
        assert got["claim"].stored_under is None and got["claim"].file_id not in (None, held.file_id)
    finally:
        other.close()


def test_a_store_from_before_the_claim_function_gets_it_at_its_first_claim(postgres, lake_spec, tmp_path):
    """A catalog created by a compilewatch without the claim function (every migration applied, the
    function missing) opens and reads without creating anything, gets the function at the first
    ingest, and ingests into it store each file once."""
    data = tmp_path / "lake-data"
    open_store(lake_spec, data).close()
    db = _dbname(lake_spec)
    exists = f"SELECT to_regprocedure('{CLAIM_FILE}(text,text,text,integer)') IS NOT NULL"
    postgres.psql(f"DROP FUNCTION {CLAIM_FILE}(text, text, text, integer)", dbname=db)
    store = open_store(lake_spec, data)
    try:
        with store.read() as con:
            assert con.execute("SELECT count(*) FROM files").fetchall() == [(0,)]
        assert postgres.psql(exists, dbname=db) == "f"
        first = ingest_paths(store, [BUNDLE])
        assert postgres.psql(exists, dbname=db) == "t"
        assert first.ok and {f.status for f in first.files} == {STORED}
        again = ingest_paths(store, [BUNDLE])
        assert {f.status for f in again.files} == {DUPLICATE}
        with store.read() as con:
            assert con.execute("SELECT count(*) FROM files").fetchall()[0][0] == len(first.files)
    finally:
        store.close()


def test_run_ids_with_quotes_and_backslashes_are_claimed_as_written(lake_store, tmp_path):
    """The claim function's call is text sent to PostgreSQL, and a run id comes from a bundle's
    manifest: quotes and backslashes in it are claimed and stored as written, and the bundle sent
    again is a duplicate, not a second copy."""
    with tarfile.open(BUNDLE) as tf:
        tf.extractall(tmp_path / "src", filter="data")
    src = next((tmp_path / "src").rglob("manifest.json")).parent
    bundle = tmp_path / "odd-run"
    shutil.copytree(src, bundle)
    run_id = "team's run \\ 1'); DROP TABLE compilewatch_claims; --"
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["run_id"] = run_id
    (bundle / "manifest.json").write_text(json.dumps(manifest))

    first = ingest_paths(lake_store, [bundle])
    assert first.ok and {f.status for f in first.files} == {STORED}
    again = ingest_paths(lake_store, [bundle])
    assert {(f.status, f.run_id) for f in again.files} == {(DUPLICATE, run_id)}
    with lake_store.read() as con:
        assert con.execute("SELECT run_id FROM runs").fetchall() == [(run_id,)]
        assert con.execute("SELECT count(*), count(DISTINCT file_id) FROM files").fetchall() == [(len(first.files),) * 2]
        keys = [r[0] for r in con.execute("SELECT key FROM pg.public.compilewatch_claims WHERE key LIKE 'run:%'").fetchall()]
    assert keys == [f"run:{run_id}"]
