"""A PostgreSQL server in a folder of its own, on 127.0.0.1: the catalog of a DuckLake team store for
trying it on one machine, for the tests and for the benchmarks. It runs Debian's `postgresql` package
(`apt-get install postgresql`), started with initdb/pg_ctl, not the system cluster.

    python -m compilewatch.store.pglocal start DIR [--port N]   # prints the COMPILEWATCH_DB value
    python -m compilewatch.store.pglocal stop DIR

A production team server is an ordinary PostgreSQL the hosts can reach; see the README's "team server".
"""
from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from compilewatch.core.errors import StoreError

DBNAME = "compilewatch"
_INSTALL_HINT = "install Debian's PostgreSQL: apt-get install -y postgresql (scripts/setup.sh --dev does it as root)"


def bin_dir() -> Path:
    """The newest /usr/lib/postgresql/N/bin (Debian keeps initdb/pg_ctl there, off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise StoreError("PostgreSQL's initdb is not installed", _INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPostgres:
    """initdb + pg_ctl on `folder`; trust authentication on the loopback address only."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder).resolve()
        self.data = self.folder / "pgdata"
        self.port_file = self.folder / "port"
        # initdb refuses to run as root; as root the server runs as the `postgres` user the package creates.
        self.as_user = "postgres" if os.geteuid() == 0 else None

    @property
    def port(self) -> int:
        return int(self.port_file.read_text())

    def dsn(self, dbname: str = DBNAME) -> str:
        return f"dbname={dbname} host=127.0.0.1 port={self.port} user=postgres"

    def lake_spec(self, dbname: str = DBNAME) -> str:
        return f"ducklake:postgres:{self.dsn(dbname)}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def init(self) -> None:
        if (self.data / "PG_VERSION").exists():
            return
        bindir = bin_dir()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(exist_ok=True)
        if self.as_user:
            uid = pwd.getpwnam(self.as_user).pw_uid
            os.chown(self.data, uid, -1)
            os.chmod(self.folder, 0o755)
        r = self._run(bindir / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", check=False)
        if r.returncode != 0:
            raise StoreError(f"initdb failed in {self.data}: {(r.stderr or r.stdout).strip()[-500:]}",
                             "as root the server runs as the postgres user: every folder above the data "
                             "folder must be readable by it (chmod o+x)")

    def start(self, port: int | None = None) -> "LocalPostgres":
        """Start (initialising first when needed) on `port` or a free one; creates the database."""
        self.init()
        if self.running():
            return self
        port = port or free_port()
        self.port_file.write_text(str(port))
        log = self.data / "server.log"
        r = self._run(bin_dir() / "pg_ctl", "-D", self.data, "-l", log, "-w", "-t", "60",
                      "-o", f"-h 127.0.0.1 -p {port} -k {self.data} -c max_connections=200", "start", check=False)
        if r.returncode != 0:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else r.stderr
            raise StoreError(f"PostgreSQL did not start on port {port}: {tail.strip()}",
                             "see the server log in the data folder; is the port taken?")
        self.create_database(DBNAME)
        return self

    def psql(self, sql: str, dbname: str = "postgres", check: bool = True) -> str:
        return self._run(bin_dir() / "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                         "-d", dbname, "-tAc", sql, check=check).stdout.strip()

    def create_database(self, dbname: str, fresh: bool = False) -> None:
        if fresh:
            self.psql(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{dbname}'"):
            self.psql(f'CREATE DATABASE "{dbname}"')

    def running(self) -> bool:
        if not (self.data / "PG_VERSION").exists():
            return False
        return self._run(bin_dir() / "pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def stop(self, mode: str = "fast") -> None:
        if self.running():
            self._run(bin_dir() / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compilewatch.store.pglocal", description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["start", "stop", "status"])
    ap.add_argument("folder", help="folder holding the server's data (created)")
    ap.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    a = ap.parse_args(argv)
    pg = LocalPostgres(a.folder)
    try:
        if a.action == "start":
            pg.start(a.port)
            print(pg.lake_spec())
        elif a.action == "stop":
            pg.stop()
        else:
            print("running" if pg.running() else "stopped")
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
