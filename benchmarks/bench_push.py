"""Push throughput: runs stored per second through `compilewatch push --wait` against a real team
server (`compilewatch dashboard` with its inbox workers, an embedded store of its own), with 1 and
with N pushers at once.

Each push is one real CPU bundle (sample_logs/cpu-torch2.13/, --bundle to pick another) under a run
id of its own: the bundle is unpacked and its manifest's run_id replaced, so every push is a new run
with all its files to store, none a duplicate. A pusher is the command a CI job runs, Python's start
included. Prints the figures and the load average they were measured at.

    .venv/bin/python benchmarks/bench_push.py --sequential 10 --concurrent 20
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copies(bundle: Path, n: int, out: Path, tag: str) -> list[Path]:
    """n copies of `bundle` as folders, each under a run id of its own."""
    src = out / "src"
    if not src.exists():
        with tarfile.open(bundle) as tf:
            tf.extractall(src, filter="data")
    top = next(p for p in src.iterdir() if p.is_dir()) if not (src / "manifest.json").exists() else src
    copies = []
    for i in range(n):
        dest = out / f"{tag}-{i}"
        shutil.copytree(top, dest)
        manifest = json.loads((dest / "manifest.json").read_text())
        manifest["run_id"] = f"bench-push-{tag}-{i}-{os.getpid()}"
        (dest / "manifest.json").write_text(json.dumps(manifest))
        copies.append(dest)
    return copies


def _push(server: str, env: dict, paths: list[Path]) -> subprocess.Popen:
    return subprocess.Popen([PY, "-m", "compilewatch", "push", *map(str, paths), "--server", server, "--wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, default=REPO / "sample_logs" / "cpu-torch2.13" / "mlp_default_infer.tar.gz")
    ap.add_argument("--sequential", type=int, default=10, help="pushes by one pusher, one after another")
    ap.add_argument("--concurrent", type=int, default=20, help="pushers at once, one push each")
    ap.add_argument("--inbox-workers", type=int, default=1)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-push-"))
    db = work / "store" / "cw.duckdb"
    port = _free_port()
    env = {**os.environ, "COMPILEWATCH_DB": str(db), "COMPILEWATCH_BOOTSTRAP": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    made = subprocess.run([PY, "-m", "compilewatch", "token", "add", "bench", "--db", str(db)],
                          capture_output=True, text=True, env=env, check=True)
    client = {k: v for k, v in os.environ.items() if not k.startswith("COMPILEWATCH_")}
    client["COMPILEWATCH_PUSH_TOKEN"] = made.stdout.splitlines()[1].strip()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([PY, "-m", "compilewatch", "dashboard", "--port", str(port),
                               "--inbox-workers", str(args.inbox_workers)], env=env, cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the dashboard did not start")
                time.sleep(0.3)
        print(f"bundle {args.bundle.relative_to(REPO) if args.bundle.is_relative_to(REPO) else args.bundle} "
              f"({args.bundle.stat().st_size / 1024:.0f} KB packed), {args.inbox_workers} inbox worker(s), "
              f"{os.cpu_count()} cores")
        # one push first, not timed: the server's first store read and the worker's first ingest
        warm = _push(url, client, _copies(args.bundle, 1, work, "warm"))
        if warm.wait() != 0:
            raise SystemExit(warm.communicate()[1])

        seq = _copies(args.bundle, args.sequential, work, "seq")
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        for path in seq:
            p = _push(url, client, [path])
            if p.wait() != 0:
                raise SystemExit(p.communicate()[1])
        dt = time.perf_counter() - t0
        print(f"1 pusher:   {args.sequential} runs in {dt:.1f} s = {args.sequential / dt:.2f} runs/s "
              f"({dt / args.sequential:.2f} s a push, --wait included); load {load0:.1f} -> {os.getloadavg()[0]:.1f}")

        conc = _copies(args.bundle, args.concurrent, work, "conc")
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        procs = [_push(url, client, [path]) for path in conc]
        bad = [p.communicate()[1] for p in procs if p.wait() != 0]
        dt = time.perf_counter() - t0
        if bad:
            raise SystemExit(bad[0])
        print(f"{args.concurrent} pushers: {args.concurrent} runs in {dt:.1f} s = {args.concurrent / dt:.2f} runs/s; "
              f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
