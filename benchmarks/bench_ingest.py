"""compilewatch ingest vs tlparse on the same >= 100 MB TORCH_TRACE, in one run.

    .venv/bin/python benchmarks/bench_ingest.py [--mb 110] [--text-mb 100]

Builds the trace by concatenating real logs (the public tlparse test logs beside the checkout, and
our own fixture traces), then runs, each in a fresh child process measured with wait4():
  1. `compilewatch ingest FILE --db fresh.duckdb`  (parse + store, the whole product path)
  2. `tlparse FILE -o out --overwrite`              (PyPI tlparse, the reference)
and prints wall time and peak RSS of both, and the ratios (targets: <= 0.25x wall, <= 0.5x RSS).
Memory must not grow with file size: the trace is ingested at 1x and 2x size and both RSS printed.
TORCH_LOGS text throughput (target >= 50 MB/s) is measured the same way on repeated real text logs.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PUBLIC = REPO.parent / "shared" / "public_logs" / "tlparse"


def _sources(kind: str) -> list[Path]:
    if kind == "trace":
        files = sorted(PUBLIC.glob("*.log")) if PUBLIC.is_dir() else []
        # tlparse keeps only the first rank it meets and skips every other rank's records, so logs
        # carrying a "rank" key would have it do less work than we do on the same bytes.
        files = [f for f in files if b'"rank":' not in f.read_bytes()]
        files += sorted((REPO / "tests" / "fixtures" / "trace").glob("*.log.gz"))
    else:
        files = sorted((REPO / "tests" / "fixtures" / "text").glob("**/*.log"))
        files += sorted((REPO / "tests" / "fixtures" / "text").glob("**/*.txt"))
        files = [f for f in files if f.name.lower() != "readme.txt"]
    if not files:
        sys.exit(f"no real {kind} logs found to build the benchmark input from")
    return files


def _read(p: Path) -> bytes:
    return gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()


def build(kind: str, target_mb: float, dest: Path) -> Path:
    chunks = [_read(p) for p in _sources(kind)]
    chunks = [c if c.endswith(b"\n") else c + b"\n" for c in chunks if c]
    with open(dest, "wb") as out:
        size = 0
        while size < target_mb * 1e6:
            for c in chunks:
                out.write(c)
                size += len(c)
    return dest


def measure(cmd: list[str], env=None) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({rc}): {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=110)
    ap.add_argument("--text-mb", type=float, default=100)
    ap.add_argument("--skip-tlparse", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-"))
    try:
        trace = build("trace", args.mb, tmp / "trace.log")
        trace2 = build("trace", 2 * args.mb, tmp / "trace2x.log")
        text = build("text", args.text_mb, tmp / "torch_logs.txt")
        cw = [str(VENV_BIN / "compilewatch"), "ingest", "--quiet"]
        mb = trace.stat().st_size / 1e6
        print(f"TORCH_TRACE input: {mb:.1f} MB built from {len(_sources('trace'))} real logs")
        w_cw, r_cw, rc = measure(cw + [str(trace), "--db", str(tmp / "a" / "db.duckdb")])
        print(f"  compilewatch ingest: {w_cw:7.2f} s  {r_cw:7.1f} MB peak RSS  ({mb / w_cw:.1f} MB/s, exit {rc})")
        w_2x, r_2x, _ = measure(cw + [str(trace2), "--db", str(tmp / "b" / "db.duckdb")])
        print(f"  compilewatch ingest at 2x size ({trace2.stat().st_size / 1e6:.0f} MB): {w_2x:7.2f} s  {r_2x:7.1f} MB peak RSS "
              f"(RSS ratio 2x/1x = {r_2x / r_cw:.2f})")
        if not args.skip_tlparse:
            w_tl, r_tl, _ = measure([str(VENV_BIN / "tlparse"), str(trace), "-o", str(tmp / "tl"), "--overwrite", "--no-browser"])
            print(f"  tlparse 0.4.3:       {w_tl:7.2f} s  {r_tl:7.1f} MB peak RSS")
            print(f"  ratio wall  compilewatch/tlparse = {w_cw / w_tl:.3f}  (target <= 0.25)")
            print(f"  ratio RSS   compilewatch/tlparse = {r_cw / r_tl:.3f}  (target <= 0.50)")
        tmb = text.stat().st_size / 1e6
        w_tx, r_tx, rc = measure(cw + [str(text), "--db", str(tmp / "c" / "db.duckdb")])
        print(f"TORCH_LOGS text input: {tmb:.1f} MB built from {len(_sources('text'))} real logs")
        print(f"  compilewatch ingest: {w_tx:7.2f} s  {r_tx:7.1f} MB peak RSS  = {tmb / w_tx:.1f} MB/s (target >= 50)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
