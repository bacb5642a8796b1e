"""The DuckLake team store with its data path on object storage, s3://bucket/prefix, against a real
S3-compatible server the tests start (`rclone serve s3`, tests/conftest.py) and a real PostgreSQL:
ingest, de-duplication, raw copies, `store copy` both ways, `maintain`, the inbox's claims under
racing workers, hostile archives, and what bad credentials say."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from tests.ingest.test_lake import (BUNDLES, REPO, SUBGRAPHS, TEXTS, TRACE, _assert_rows_match_files, inbox_workers,
                                    same_tables_as_embedded)


def _objects(server, data_path: str, under: str) -> dict[str, bytes]:
    """What the S3 server holds under data_path/under, read through S3 with boto3 (not its folder)."""
    import boto3
    bucket, _, prefix = data_path[len("s3://"):].partition("/")
    s3 = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                      aws_access_key_id=server.key, aws_secret_access_key=server.secret)
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/{under}/"):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix) + 1:]] = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def test_ingest_and_read_with_the_data_on_s3(lake_store_s3, s3_server, tmp_path):
    """The same inputs into an embedded store and into a lake on S3: every table equal; the Parquet
    and every raw copy lie in the bucket (and nowhere on this host), byte for byte; an artifact is
    read back out of its raw copy on S3; a second ingest stores nothing twice."""
    store, data_path = lake_store_s3, str(lake_store_s3.location)
    inputs = [TRACE, *TEXTS[:2], *BUNDLES[:2], *SUBGRAPHS[:1]]
    embedded = same_tables_as_embedded(store, inputs, tmp_path)
    with store.read() as lake:
        stored = lake.execute("SELECT stored_path, sha256 FROM files").fetchall()
    parquet = [k for k in _objects(s3_server, data_path, "lake") if k.endswith(".parquet")]
    with store.read() as lake:
        live = lake.execute("SELECT * FROM postgres_query('pg', 'SELECT count(*) FROM ducklake_data_file "
                            "WHERE end_snapshot IS NULL')").fetchall()[0][0]
    assert live > 0 and len(parquet) >= live     # every live data file of the catalog is in the bucket
    raw = _objects(s3_server, data_path, "raw")
    assert {p for p, _ in stored} == set(raw)
    assert all(hashlib.sha256(raw[p]).hexdigest() == sha for p, sha in stored)
    assert not (store.folder / "raw").exists() and not (store.folder / "lake").exists()

    # an artifact whose payload is read again out of its file's raw copy (a ranged GET on S3)
    from compilewatch.deepdive.artifacts import fetch
    with store.read() as lake, embedded.read() as emb:
        which = ("SELECT a.run_id, a.file_id, a.line_no, f.sha256 FROM artifacts a JOIN files f USING (file_id) "
                 "WHERE a.payload_z IS NULL AND a.raw_offset IS NOT NULL ORDER BY a.run_id, f.sha256, a.line_no LIMIT 1")
        found = lake.execute(which).fetchall()
        assert found, "no artifact refers to its raw copy: the inputs no longer exercise the ranged read"
        mine = emb.execute(which).fetchall()
        assert fetch(lake, *found[0][:3]).text == fetch(emb, *mine[0][:3]).text != ""

    again = ingest_paths(store, inputs)
    assert again.ok and again.count("stored") == 0 and again.count("duplicate") == len(again.files)
    assert set(_objects(s3_server, data_path, "raw")) == set(raw)
    _assert_rows_match_files(store)

    # reingest reads each raw copy back from the bucket and writes the same rows again
    from compilewatch.ingest.file_kind import UNKNOWN
    from compilewatch.ingest.reingest import reingest
    with store.read() as con:
        before = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("files", "graph_breaks", "artifacts")}
        parsed = con.execute("SELECT count(*) FROM files WHERE kind <> ?", [UNKNOWN]).fetchall()[0][0]
    assert parsed and reingest(store, all_files=True) == parsed
    with store.read() as con:
        assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in before} == before


def _client(server):
    import boto3
    return boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                        aws_access_key_id=server.key, aws_secret_access_key=server.secret)


def _put(server, data_path: str, rel: str, body: bytes) -> None:
    """One PUT, as a collector on another machine uploads into the inbox."""
    bucket, _, prefix = data_path[len("s3://"):].partition("/")
    _client(server).put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=body)


def _env(store, server):
    return {**os.environ, **server.env(), "COMPILEWATCH_DB": store.spec, "COMPILEWATCH_DATA_PATH": str(store.location)}


def test_inbox_workers_on_s3_claim_each_entry_once(lake_store_s3, s3_server):
    """Three `inbox --watch` workers (as on three hosts) on one store whose inbox is a prefix of a
    bucket: each entry uploaded into it is ingested by exactly one worker, its receipt written, and
    it moves to done/; a re-sent copy is a duplicate; nothing is stored twice."""
    store = lake_store_s3
    data_path = str(store.location)
    bundles = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
    names = [b.name for b in bundles] + [f"resent-{bundles[0].name}"]
    for name, b in zip(names, [*bundles, bundles[0]]):
        _put(s3_server, data_path, f"inbox/{name}", b.read_bytes())
    _put(s3_server, data_path, "inbox/.uploading.tar.gz", b"half of an upload")   # a writer's temporary name
    # as the push endpoint queues a push: once per name, whatever was queued or settled before
    from compilewatch.store.inbox import QUEUED, SETTLED, for_store
    queue = for_store(store)
    pushed = "push-0123.tar.gz"
    names.append(pushed)
    for expect in (True, False):
        staged = store.tmp_dir / "staged"
        staged.write_bytes(bundles[1].read_bytes())
        assert queue.enqueue(staged, pushed) is expect and not staged.exists()
    assert queue.entry_state(pushed) == QUEUED and queue.entry_state("push-never.tar.gz") is None
    env = _env(store, s3_server)
    outs = inbox_workers(env, lambda: len(_objects(s3_server, data_path, "inbox/done")) == len(names))
    inbox = _objects(s3_server, data_path, "inbox")
    assert sorted(k for k in inbox if k.startswith("inbox/done/")) == sorted(f"inbox/done/{n}" for n in names)
    assert sorted(k for k in inbox if k.startswith("inbox/receipts/")) == sorted(f"inbox/receipts/{n}.json" for n in names)
    receipts = {n: [f["status"] for f in json.loads(inbox[f"inbox/receipts/{n}.json"])["files"]] for n in names}
    # each entry ingested by exactly one worker: a second ingest would have left a receipt of duplicates
    # (a copy and its original may be ingested at once: which of the two stores a file is a race)
    pairs = ((bundles[0].name, f"resent-{bundles[0].name}"), (bundles[1].name, pushed))
    for original, copy in pairs:
        both = Counter(receipts[original]) + Counter(receipts[copy])
        assert both == Counter({"stored": len(receipts[original]), "duplicate": len(receipts[original])}), receipts
    alone = set(names) - {n for pair in pairs for n in pair}
    assert alone and all(set(receipts[n]) == {"stored"} for n in alone), receipts
    assert queue.entry_state(pushed) == SETTLED and queue.read_receipt(pushed)["files"]
    staged = store.tmp_dir / "staged"
    staged.write_bytes(bundles[1].read_bytes())
    assert queue.enqueue(staged, pushed) is False          # settled: the same push is not queued again
    assert not any(k.startswith("inbox/failed/") for k in inbox)
    assert "inbox/.uploading.tar.gz" in inbox and not any(k in inbox for k in (f"inbox/{n}" for n in names))
    # and the work was shared (a worker stopped mid-pass may not have printed what it did)
    assert sum(1 for o in outs if ".tar.gz:" in o) >= 2, outs
    with store.read() as con:
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchall()[0] == (len(bundles), len(bundles))
        assert con.execute("SELECT count(*) = count(DISTINCT (run_id, sha256)) FROM files").fetchall()[0][0]
    _assert_rows_match_files(store)


def test_hostile_entries_in_the_s3_inbox_fail_alone(lake_store_s3, s3_server, tmp_path):
    """Damaged, cut, bomb and escaping archives uploaded into the inbox on S3 beside a good bundle
    (the hostile inputs of tests/ingest/test_hostile_inputs.py): each bad entry goes to failed/ with
    its reason, nothing of it is stored (no row, no raw copy), nothing is written outside the
    worker's scratch, and the good bundle is stored."""
    import gzip
    import zipfile

    from compilewatch.ingest.inbox import process_once
    from tests.ingest.test_hostile_inputs import (BUNDLE, BUNDLE2, ESCAPES, TEXT_LOG, _damage, _zeros_tar,
                                                  _zip_of_bundle, escaping_tar)
    store, data_path = lake_store_s3, str(lake_store_s3.location)
    outside = tmp_path.parent / "cw-evil.log"
    zbomb = tmp_path / "zbomb.zip"
    with zipfile.ZipFile(zbomb, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("zeros.log", "w", force_zip64=True) as out:
            for _ in range(200):
                out.write(bytes(2**20))
    bad = {"bad.zip": _damage(_zip_of_bundle(BUNDLE2, tmp_path / "m.zip").read_bytes(), 0.3, 400),
           "cut.tar.gz": BUNDLE2.read_bytes()[:5000],
           "flipped.tar.gz": _damage(BUNDLE2.read_bytes(), 0.5),
           "bomb.tar.gz": _zeros_tar(tmp_path / "bomb.tar.gz", 300 * 2**20).read_bytes(),
           "zbomb.zip": zbomb.read_bytes(),
           **{f"{k}.tar.gz": escaping_tar(k, tmp_path / f"{k}.tar.gz", outside).read_bytes() for k in ESCAPES}}
    for name, body in bad.items():
        _put(s3_server, data_path, f"inbox/{name}", body)
    _put(s3_server, data_path, "inbox/good.tar.gz", BUNDLE.read_bytes())
    _put(s3_server, data_path, "inbox/bad.log.gz", _damage(gzip.compress(TEXT_LOG.read_bytes()), 0.5))

    results = dict(process_once(store))
    assert set(results) == {*bad, "good.tar.gz", "bad.log.gz"}
    assert results["good.tar.gz"].ok and results["bad.log.gz"].ok   # a damaged .gz log keeps what decodes
    inbox = _objects(s3_server, data_path, "inbox")
    for name in bad:
        assert not results[name].ok, name
        reason = inbox[f"inbox/failed/{name}.error.txt"].decode()
        assert any(w in reason for w in ("damaged", "decompression bomb", "link", "escapes", "device")), (name, reason)
    assert "inbox/done/good.tar.gz" in inbox and not outside.exists()
    with store.read() as con:
        stored = {r[0] for r in con.execute("SELECT stored_path FROM files").fetchall()}
        assert con.execute("SELECT count(DISTINCT run_id) FROM files").fetchall()[0][0] == 2
    assert set(_objects(s3_server, data_path, "raw")) == stored   # no raw copy of a refused archive
    assert [p for p in store.tmp_root.rglob("*") if p.is_file()] == []


def test_bad_credentials_bucket_or_endpoint_is_a_clear_error(lake_spec, s3_server, s3_data_path, monkeypatch):
    """A refused key, a bucket that does not exist and an endpoint that does not answer are each an
    ObjectStoreError naming what to fix, from the library and from the CLI, before anything is created."""
    from compilewatch.core.errors import ObjectStoreError
    cases = [({"AWS_SECRET_ACCESS_KEY": "wrong"}, s3_data_path, "S3 refused", "AWS_SECRET_ACCESS_KEY"),
             ({}, "s3://no-such-bucket/x", "bucket no-such-bucket does not exist", "create it"),
             ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, s3_data_path, "cannot reach the S3 endpoint", "AWS_ENDPOINT_URL")]
    for overrides, data_path, title, hint in cases:
        env = s3_server.env(**overrides)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(ObjectStoreError) as e:
            open_store(lake_spec, data_path)
        assert title in e.value.title and hint in e.value.hint, (e.value.title, e.value.hint)
        r = subprocess.run([sys.executable, "-m", "compilewatch", "stats", "--db", lake_spec, "--data-path", data_path],
                           cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and title in r.stderr and hint in r.stderr, r.stderr
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    with open_store(lake_spec, s3_data_path).read() as con:   # nothing was created by the refused opens
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 0


def test_credentials_from_a_duckdb_secret(lake_spec, s3_server, s3_data_path, tmp_path):
    """With no AWS credentials, a persistent DuckDB secret for the bucket serves both DuckDB and the
    raw copies; without either, the command says what to set."""
    import duckdb

    from compilewatch.store.lake import extension_path
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(home), AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=str(home / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(home / "none"))
    args = [sys.executable, "-m", "compilewatch", "ingest", "--db", lake_spec, "--data-path", s3_data_path, str(TRACE)]
    r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "no S3 credentials" in r.stderr and "DuckDB secret" in r.stderr, r.stderr
    con = duckdb.connect(config={"secret_directory": str(home / ".duckdb" / "stored_secrets")})
    con.execute(f"LOAD '{extension_path('duckdb_extension_httpfs', 'httpfs')}'")
    con.execute(f"CREATE PERSISTENT SECRET cw_test (TYPE s3, KEY_ID '{s3_server.key}', SECRET '{s3_server.secret}', "
                f"ENDPOINT '127.0.0.1:{s3_server.port}', USE_SSL false, URL_STYLE 'path', REGION 'us-east-1', "
                "SCOPE 's3://cw')")
    con.close()
    r = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with open_store(lake_spec, s3_data_path).read() as con:
        stored = con.execute("SELECT stored_path FROM files").fetchall()
    assert len(stored) == 1 and set(_objects(s3_server, s3_data_path, "raw")) == {stored[0][0]}
