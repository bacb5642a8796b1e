"""Where a store keeps its files: a folder (local or NFS) or an S3 prefix, `s3://bucket/prefix`.

Raw copies, the inbox and maintain's sweep of orphaned raw copies all go through a `Location`, so
a folder and a bucket take the same code paths; DuckDB reads and writes the Parquet data itself
(DuckLake's DATA_PATH, through the httpfs extension from its PyPI wheel), with the credentials
resolved here (`duckdb_secret_sql`).

The S3 client is boto3. It finds credentials the way every AWS tool does (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws/, AWS_ENDPOINT_URL, AWS_REGION, instance and
container roles), so a team server's AWS set-up works as it is, and the credentials it resolves
are the ones DuckDB is given: both clients act as one identity. It is AWS's own, maintained with
the service. obstore refuses a ranged read from S3-compatible servers that answer it with a 200 and
a Content-Range (rclone's server does) and reads no ~/.aws profile; s3fs is fsspec and aiobotocore
over the same botocore.

Objects are written whole by one PUT, so a reader never sees half of one, as a rename gives on a
folder. S3 has no rename: a move is a copy and a delete, which is why the inbox's claims on S3 are
held in the catalog's PostgreSQL (store/inbox.py) rather than by moving the entry.
"""
from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from compilewatch.core.errors import ObjectStoreError

S3_SCHEME = "s3://"


def is_s3(data_path) -> bool:
    return isinstance(data_path, str) and data_path.lower().startswith(S3_SCHEME)


@dataclass(frozen=True)
class Entry:
    rel: str        # the path below the location's root, "/"-separated
    size: int
    mtime: float    # seconds since the epoch


class Location:
    """A root that paths relative to it ("raw/ab/<sha256>", "inbox/x.tar.gz") name files under."""

    remote = False

    def uri(self, rel: str = "") -> str: ...
    def exists(self, rel: str) -> bool: ...
    def publish(self, rel: str, staged: Path) -> None: ...
    def write_bytes(self, rel: str, data: bytes) -> None: ...
    def read_bytes(self, rel: str, offset: int = 0, length: int | None = None) -> bytes: ...
    def download(self, rel: str, dest: Path) -> None: ...
    def delete(self, rel: str) -> None: ...
    def move(self, rel: str, to: str) -> None: ...
    def entries(self, prefix: str) -> Iterator[Entry]: ...

    @contextmanager
    def local_file(self, rel: str, tmp_dir: Path) -> Iterator[Path | None]:
        """`rel` as a file on this host for the block (a download into tmp_dir where the location
        is remote, removed after), or None when there is no such file."""
        dest = Path(tmp_dir) / f"get-{os.getpid()}-{threading.get_ident()}-{Path(rel).name}"
        try:
            self.download(rel, dest)
        except FileNotFoundError:
            yield None
            return
        try:
            yield dest
        finally:
            dest.unlink(missing_ok=True)

    def total_bytes(self, prefix: str) -> int:
        return sum(e.size for e in self.entries(prefix))

    def publish_new(self, rel: str, staged: Path) -> bool:
        """Publish `staged` as `rel` unless `rel` exists (content-addressed: the same name holds the
        same bytes); `staged` is gone afterwards either way. Returns whether it was written."""
        try:
            if self.exists(rel):
                return False
            self.publish(rel, staged)
            return True
        finally:
            staged.unlink(missing_ok=True)


class Folder(Location):
    """A folder on this host's filesystem (an NFS mount shared by every host included)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()

    def __str__(self) -> str:
        return str(self.root)

    def path(self, rel: str) -> Path:
        return self.root / rel

    @contextmanager
    def local_file(self, rel: str, tmp_dir: Path) -> Iterator[Path | None]:
        path = self.root / rel
        yield path if path.is_file() else None

    def uri(self, rel: str = "") -> str:
        return str(self.root / rel) if rel else str(self.root)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def publish(self, rel: str, staged: Path) -> None:
        # staged lies on the same filesystem (the store's tmp/): the rename is atomic
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        staged.replace(dest)

    def write_bytes(self, rel: str, data: bytes) -> None:
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(dest)

    def read_bytes(self, rel: str, offset: int = 0, length: int | None = None) -> bytes:
        with open(self.root / rel, "rb") as f:
            f.seek(offset)
            return f.read() if length is None else f.read(length)

    def download(self, rel: str, dest: Path) -> None:
        shutil.copyfile(self.root / rel, dest)

    def delete(self, rel: str) -> None:
        (self.root / rel).unlink(missing_ok=True)

    def move(self, rel: str, to: str) -> None:
        dest = self.root / to
        dest.parent.mkdir(parents=True, exist_ok=True)
        (self.root / rel).rename(dest)

    def entries(self, prefix: str) -> Iterator[Entry]:
        base = self.root / prefix
        for dirpath, _, files in os.walk(base):
            for f in files:
                p = os.path.join(dirpath, f)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue    # removed between the listing and the look
                yield Entry(Path(p).relative_to(self.root).as_posix(), st.st_size, st.st_mtime)


class S3Prefix(Location):
    """A prefix of an S3 bucket, `s3://bucket/prefix`, on AWS or any S3-compatible server
    (AWS_ENDPOINT_URL)."""

    remote = True

    def __init__(self, url: str):
        rest = url[len(S3_SCHEME):].strip("/")
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ObjectStoreError(f"{url!r} names no bucket", "write the data path as s3://BUCKET/PREFIX")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self._client = self._session = None
        self.from_duckdb_secret = False
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return self.uri()

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def uri(self, rel: str = "") -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.key(rel)}".rstrip("/")

    # -- the client and its credentials ----------------------------------------------------------------
    def client(self):
        """One boto3 client per location (thread-safe once made): the standard credential chain,
        endpoint and region from the environment."""
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config
                # Path-style addressing: what S3-compatible servers (MinIO, rclone, Ceph) take
                # everywhere, and AWS as well. Checksums only where the operation needs them: some
                # servers answer a ranged GET with the whole object's checksum (rclone's does), which
                # botocore would then check the range against.
                self._session = boto3.session.Session()
                config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"},
                                request_checksum_calculation="when_required",
                                response_checksum_validation="when_required")
                kw = {}
                if self._session.get_credentials() is None and (secret := duckdb_secret_for(self.uri())):
                    # no AWS credentials, but a DuckDB secret for this bucket: boto3 uses it too
                    self.from_duckdb_secret = True
                    scheme = "http" if secret.get("use_ssl") == "false" else "https"
                    kw = {"aws_access_key_id": secret.get("key_id"), "aws_secret_access_key": secret.get("secret"),
                          "aws_session_token": secret.get("session_token") or None,
                          "region_name": secret.get("region") or None,
                          "endpoint_url": f"{scheme}://{secret['endpoint']}" if secret.get("endpoint") else None}
                self._client = self._session.client("s3", config=config, **kw)
            return self._client

    def check(self) -> None:
        """Raise ObjectStoreError, with what to fix, when the bucket cannot be reached or written."""
        self._call(lambda c: c.head_bucket(Bucket=self.bucket), "")

    def _call(self, fn, rel: str):
        import botocore.exceptions as bex
        try:
            return fn(self.client())
        except bex.NoCredentialsError:
            raise ObjectStoreError(f"no S3 credentials for {self.uri(rel)}",
                                   "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for this process, "
                                   "or create a DuckDB secret for the bucket (CREATE PERSISTENT SECRET ... TYPE s3)") from None
        except (bex.EndpointConnectionError, bex.ConnectTimeoutError) as e:
            raise ObjectStoreError(f"cannot reach the S3 endpoint for {self.uri(rel)}: {e}",
                                   "check AWS_ENDPOINT_URL (an S3-compatible server) or the network to AWS") from None
        except bex.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403") or status == 403:
                raise ObjectStoreError(f"S3 refused {self.uri(rel)}: {code or status}",
                                       "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the key's rights on "
                                       f"the bucket {self.bucket}") from None
            if code in ("NoSuchBucket",) or (status == 404 and not rel):
                raise ObjectStoreError(f"the bucket {self.bucket} does not exist at the S3 endpoint",
                                       "create it, or fix the bucket name in --data-path") from None
            if status == 404 or code in ("NoSuchKey", "404"):
                raise FileNotFoundError(2, "no such object", self.uri(rel)) from None
            raise
        except bex.BotoCoreError as e:
            raise ObjectStoreError(f"S3 request for {self.uri(rel)} failed: {e}",
                                   "check AWS_ENDPOINT_URL, AWS_REGION and the credentials") from None

    def credentials(self) -> dict:
        """What DuckDB's S3 secret needs, from the same chain boto3 uses."""
        client = self.client()
        found = None if self.from_duckdb_secret else self._session.get_credentials()
        if found is None:
            raise ObjectStoreError(f"no S3 credentials for {self.uri()}",
                                   "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for this process")
        frozen = found.get_frozen_credentials()
        return {"key_id": frozen.access_key, "secret": frozen.secret_key, "session_token": frozen.token,
                "region": client.meta.region_name or "us-east-1", "endpoint": client.meta.endpoint_url}

    # -- objects ---------------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        try:
            self._call(lambda c: c.head_object(Bucket=self.bucket, Key=self.key(rel)), rel)
            return True
        except FileNotFoundError:
            return False

    def publish(self, rel: str, staged: Path) -> None:
        self._call(lambda c: c.upload_file(str(staged), self.bucket, self.key(rel)), rel)

    def write_bytes(self, rel: str, data: bytes) -> None:
        self._call(lambda c: c.put_object(Bucket=self.bucket, Key=self.key(rel), Body=data), rel)

    def read_bytes(self, rel: str, offset: int = 0, length: int | None = None) -> bytes:
        kw = {}
        if offset or length is not None:
            kw["Range"] = f"bytes={offset}-{'' if length is None else offset + length - 1}"
        body = self._call(lambda c: c.get_object(Bucket=self.bucket, Key=self.key(rel), **kw), rel)["Body"]
        return body.read()

    def download(self, rel: str, dest: Path) -> None:
        self._call(lambda c: c.download_file(self.bucket, self.key(rel), str(dest)), rel)

    def delete(self, rel: str) -> None:
        self._call(lambda c: c.delete_object(Bucket=self.bucket, Key=self.key(rel)), rel)

    def move(self, rel: str, to: str) -> None:
        self._call(lambda c: c.copy_object(Bucket=self.bucket, Key=self.key(to),
                                           CopySource={"Bucket": self.bucket, "Key": self.key(rel)}), rel)
        self.delete(rel)

    def entries(self, prefix: str) -> Iterator[Entry]:
        pages = self._call(lambda c: c.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.key(prefix.rstrip("/") + "/")), prefix)
        skip = len(self.prefix) + 1 if self.prefix else 0
        it = iter(pages)
        while True:
            page = self._call(lambda c: next(it, None), prefix)
            if page is None:
                return
            for o in page.get("Contents", []):
                yield Entry(o["Key"][skip:], o["Size"], o["LastModified"].timestamp())


def location(data_path: str | os.PathLike) -> Location:
    """The Location a data path names: `s3://bucket/prefix`, or a folder."""
    return S3Prefix(data_path) if is_s3(os.fspath(data_path)) else Folder(data_path)


def duckdb_secret_sql(loc: S3Prefix) -> str:
    """A temporary DuckDB secret, scoped to the location's bucket, holding the credentials, region
    and endpoint boto3 resolved: DuckDB's httpfs then reads and writes the Parquet data as the same
    identity. Without credentials in the chain, no secret: one the user created with DuckDB's
    CREATE PERSISTENT SECRET (~/.duckdb/stored_secrets) is used instead."""
    from urllib.parse import urlparse
    try:
        c = loc.credentials()
    except ObjectStoreError:
        return ""    # none, or the credentials are a DuckDB secret's: DuckDB reads its own

    def lit(s) -> str:
        return "'" + str(s).replace("'", "''") + "'"

    parts = ["TYPE s3", f"KEY_ID {lit(c['key_id'])}", f"SECRET {lit(c['secret'])}", f"REGION {lit(c['region'])}",
             "URL_STYLE 'path'", f"SCOPE {lit(S3_SCHEME + loc.bucket)}"]
    if c["session_token"]:
        parts.append(f"SESSION_TOKEN {lit(c['session_token'])}")
    endpoint = urlparse(c["endpoint"] or "")
    if endpoint.netloc and not endpoint.netloc.endswith("amazonaws.com"):
        parts.append(f"ENDPOINT {lit(endpoint.netloc)}")
        parts.append(f"USE_SSL {'true' if endpoint.scheme == 'https' else 'false'}")
    return f"CREATE OR REPLACE TEMPORARY SECRET compilewatch_s3 ({', '.join(parts)})"


def duckdb_secret_for(uri: str) -> dict | None:
    """The fields of the DuckDB secret (CREATE PERSISTENT SECRET ... TYPE s3, in
    ~/.duckdb/stored_secrets) that DuckDB would use for `uri`, or None."""
    import duckdb

    from compilewatch.store.lake import extension_path
    try:
        con = duckdb.connect(config={"allow_unredacted_secrets": True})
    except duckdb.Error:
        return None
    try:
        con.execute(f"LOAD '{extension_path('duckdb_extension_httpfs', 'httpfs')}'")
        found = con.execute("SELECT name FROM which_secret(?, 's3')", [uri]).fetchall()
        if not found:
            return None
        text = con.execute("SELECT secret_string FROM duckdb_secrets(redact => false) WHERE name = ?",
                           [found[0][0]]).fetchall()[0][0]
    except duckdb.Error:
        return None
    finally:
        con.close()
    return dict(part.split("=", 1) for part in text.split(";") if "=" in part)


def local_work_folder(loc: Location) -> Path:
    """This host's own folder for a remote location's scratch (tmp/), one per location: what a
    process killed mid-ingest leaves there is swept by the next one on this host (store/scratch.py)."""
    import hashlib
    import tempfile
    tag = hashlib.sha256(loc.uri().encode()).hexdigest()[:16]
    return Path(os.environ.get("XDG_CACHE_HOME") or tempfile.gettempdir()) / "compilewatch-s3" / tag
