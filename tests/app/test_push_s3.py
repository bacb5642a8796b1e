"""`compilewatch push` to a team server whose store is DuckLake with its data path on object storage:
the Parquet data, the raw copies and the inbox all under s3://bucket/prefix on a real S3-compatible
server (`rclone serve s3`, tests/conftest.py), the catalog on a real PostgreSQL. The CI runner that
pushes has no store settings, no mount and no S3 credentials; the server alone talks to the bucket.
The bundles are real runs (tests/fixtures/review/, each folder's README names the command that made
them)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from contextlib import contextmanager

import pytest

from push_support import (ROOT, TeamServer, cli, client_env, kill_mid_ingest, push_baseline_then_regression,
                          restart_until_settled)
from tests.ingest.test_lake_s3 import _objects

pytestmark = pytest.mark.timeout(900)


@contextmanager
def _serving(tmp_path, s3_server, lake_spec, data_path):
    """A team server on DuckLake with its data path in the bucket, and a CI runner's folder: the S3
    credentials and endpoint are in the server's environment alone, as a team server's are; its
    scratch (the bodies it receives, the entries it ingests: what must stay on its host) lies in
    its folder's cache/, to be looked at."""
    folder = tmp_path / "server"
    server = TeamServer(folder, {**s3_server.env(), "XDG_CACHE_HOME": str(folder / "cache")}, lake_spec=lake_spec,
                        data_path=data_path).start()
    runner = tmp_path / "runner"
    runner.mkdir()
    try:
        server.ci_token = server.token()
        yield server, runner
    finally:
        server.stop()


def _push(server, paths, *flags, tmp):
    """A CI runner's push: nothing of the store, nor any AWS setting, in its environment."""
    env = {k: v for k, v in client_env(tmp).items() if not k.startswith("AWS_")}
    env["COMPILEWATCH_PUSH_TOKEN"] = server.ci_token
    return cli("push", *paths, "--server", server.url, *flags, env=env, cwd=tmp)


def test_push_to_a_team_server_with_its_store_on_s3(lake_spec, s3_server, s3_data_path, tmp_path):
    """Push, wait and check against a server whose store's data path is s3://: every pushed run is
    stored once, a repeat push is a duplicate; the Parquet data, each raw copy (byte for byte) and
    every settled push lie in the bucket; the inbox keeps no entry queued, half-written or failed;
    and the server's own folder holds nothing of the store, its scratch left empty."""
    with _serving(tmp_path, s3_server, lake_spec, s3_data_path) as (server, runner):
        push_baseline_then_regression(_push, server, runner)
        stored = _stored_files(server)

    # the Parquet data under the prefix
    assert any(k.endswith(".parquet") for k in _objects(s3_server, s3_data_path, "lake"))
    # every stored file's raw copy in the bucket, and nothing else there
    raw = _objects(s3_server, s3_data_path, "raw")
    assert stored and {p for p, _ in stored} == set(raw)
    assert all(hashlib.sha256(raw[p]).hexdigest() == sha for p, sha in stored)
    # the inbox: the two pushes taken, each settled in done/ with its receipt; nothing queued,
    # failed or half-uploaded (the repeat push was never queued)
    objects = _objects(s3_server, s3_data_path, "inbox")
    inbox = sorted(objects)
    done = [k for k in inbox if k.startswith("inbox/done/")]
    receipts = [k for k in inbox if k.startswith("inbox/receipts/")]
    assert len(done) == 2 and all(k.rsplit("/", 1)[1].startswith("push-") for k in done), inbox
    assert sorted(f"inbox/receipts/{k.rsplit('/', 1)[1]}.json" for k in done) == receipts
    assert set(inbox) == set(done) | set(receipts), inbox
    assert all(json.loads(objects[k])["ok"] for k in receipts)

    # on the server's host: its log, and its scratch folder with no file left in it
    folder = tmp_path / "server"
    assert (folder / "cache" / "compilewatch-s3").is_dir()
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert left == ["server.log"], left
    assert not any(p.name in ("raw", "lake", "inbox") for p in folder.rglob("*")), sorted(folder.rglob("*"))
    assert not [p for p in runner.rglob("*") if p.is_file()]   # the runner kept nothing either


def test_a_server_killed_mid_ingest_of_a_push_on_s3_stores_it_once_after_restart(lake_spec, s3_server, s3_data_path,
                                                                                  tmp_path):
    """SIGKILL to the whole server while its inbox worker ingests a push held on S3: the claim (a
    lock in the catalog's PostgreSQL) goes with the dead worker's connection, the entry stays queued
    in the bucket, and a new server on the same store ingests it: the run stored once, each file
    once, the entry settled in done/; the dead worker's scratch is swept from the server's host."""
    with _serving(tmp_path, s3_server, lake_spec, s3_data_path) as (server, runner):
        bundle = max((ROOT / "sample_logs" / "gpu-h200-torch2.11").glob("*.tar.gz"), key=lambda p: p.stat().st_size)
        pushed = _push(server, [bundle], "--json", tmp=runner)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        push_id = json.loads(pushed.stdout)["push"]["push"]
        entry = f"push-{push_id}.tar.gz"
        # the claimed entry's local copy: the worker holds its lock and is ingesting it
        scratch = tmp_path / "server" / "cache" / "compilewatch-s3"
        kill_mid_ingest(server, scratch, f"*/tmp/*/inbox-*/{entry}")
        assert f"inbox/{entry}" in _objects(s3_server, s3_data_path, "inbox"), "the ingest ended before the kill"
        assert list(scratch.glob(f"*/tmp/*/inbox-*/{entry}"))   # what the dead worker left on the host
        restart_until_settled(server, push_id, server.ci_token)
    inbox = _objects(s3_server, s3_data_path, "inbox")
    assert sorted(inbox) == [f"inbox/done/{entry}", f"inbox/receipts/{entry}.json"], sorted(inbox)
    assert not [p for p in scratch.rglob("*") if p.is_file()]


def _stored_files(server) -> list[tuple[str, str]]:
    """(stored_path, sha256) of every stored file, read by a process with the server's settings."""
    code = ("import json, sys\nfrom compilewatch.store import open_store\n"
            "with open_store(sys.argv[1], sys.argv[2]).read() as con:\n"
            "    print(json.dumps(con.execute('SELECT stored_path, sha256 FROM files').fetchall()))")
    got = subprocess.run([sys.executable, "-c", code, str(server.db), server.data_path], capture_output=True,
                         text=True, env=server.env, timeout=300)
    assert got.returncode == 0, got.stderr
    return [tuple(r) for r in json.loads(got.stdout)]

