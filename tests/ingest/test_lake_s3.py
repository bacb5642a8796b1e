"""The DuckLake team store with its data path on object storage, s3://bucket/prefix, against a real
S3-compatible server the tests start (`rclone serve s3`, tests/conftest.py) and a real PostgreSQL:
ingest, de-duplication, raw copies, `store copy` both ways, `maintain`, the inbox's claims under
racing workers, hostile archives, and what bad credentials say."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from tests.ingest.test_lake import (BUNDLES, REPO, SUBGRAPHS, TEXTS, TRACE, _assert_rows_match_files,
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
