"""TORCH_TRACE parse speed and memory against tlparse, on the same >= 100 MB file.

    .venv/bin/python benchmarks/bench_trace_parse.py [--mb 111] [--repeat 3] [--keep DIR]

Builds the input in a temp dir by concatenating real traces: the public tlparse test logs in
../shared/public_logs/tlparse (when present) and our own fixtures in tests/fixtures/trace/, repeated
until the file reaches --mb. Only logs without a "rank" key are used: tlparse renders the first rank it
meets and skips every record of another rank (its `other_rank` count), which would let it do less work
than we do on the same bytes.

Each side runs in its own child process, so peak RSS (ru_maxrss from wait4) is that side's alone:
- ours: ``ingest.trace.parse_trace`` over the file opened in binary mode, with a sink that only counts;
- tlparse: ``.venv/bin/tlparse FILE -o OUTDIR --overwrite --no-browser`` (tlparse 0.4.3 from PyPI).
The best of --repeat runs is reported for each, and the ratio ours / tlparse for time and RSS.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PUBLIC = (REPO / ".." / "shared" / "public_logs" / "tlparse").resolve()
FIXTURES = REPO / "tests" / "fixtures" / "trace"
TLPARSE = REPO / ".venv" / "bin" / "tlparse"

CHILD = r"""
import json, sys, time
from compilewatch.ingest.trace import parse_trace
from compilewatch.ingest.records import CountingSink

sink = CountingSink()
t = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    stats = parse_trace(f, sink)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rows": sink.rows, "errors": sink.errors, "envelopes": stats.envelopes,
                  "lines": stats.lines}))
"""


def source_logs() -> list[bytes]:
    logs = []
    if PUBLIC.is_dir():
        for p in sorted(PUBLIC.glob("*.log")):
            data = p.read_bytes()
            if b'"rank": ' not in data:
                logs.append(data)
    for p in sorted(FIXTURES.glob("*.log*")):
        data = p.read_bytes()
        logs.append(gzip.decompress(data) if p.name.endswith(".gz") else data)
    # each piece must end on a newline, or its last line would run into the next file's first
    return [d if d.endswith(b"\n") else d + b"\n" for d in logs]


def build_input(path: Path, target_mb: float) -> int:
    one = b"".join(source_logs())
    if not one:
        sys.exit("no traces found: need tests/fixtures/trace/ or ../shared/public_logs/tlparse")
    copies = max(1, -(-int(target_mb * 1e6) // len(one)))
    with open(path, "wb") as f:
        for _ in range(copies):
            f.write(one)
    return len(one) * copies


def run_child(cmd: list[str], env=None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, stdout) of one child process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        # wait4 instead of wait(): it returns this child's own rusage (peak RSS)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{cmd[0]} failed ({proc.returncode}): {err.read().decode(errors='replace')[-2000:]}")
        return wall, rusage.ru_maxrss * 1024, out.read().decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=111.0, help="size of the concatenated trace (default 111)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side; the best is reported (default 3)")
    ap.add_argument("--keep", type=Path, help="write the input here and keep it, instead of a temp dir")
    ap.add_argument("--no-tlparse", action="store_true", help="only time our parser")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_trace_"))
    try:
        path = (args.keep or tmp) / "concatenated_trace.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        size = build_input(path, args.mb)
        mb = size / 1e6
        print(f"input: {path} {mb:.1f} MB")

        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        ours = []
        for _ in range(args.repeat):
            wall, rss, out = run_child([sys.executable, "-c", CHILD, str(path)], env=env)
            ours.append((wall, rss, json.loads(out)))
        wall, rss, info = min(ours, key=lambda r: r[0])
        print(f"parse_trace: {wall:.2f} s wall ({info['seconds']:.2f} s inside the parse), {mb / wall:.0f} MB/s, "
              f"peak RSS {rss / 2**20:.0f} MB; {info['lines']} lines, {info['envelopes']} envelopes, "
              f"rows {info['rows']}, errors {info['errors']}")

        if args.no_tlparse:
            return
        if not TLPARSE.exists():
            sys.exit(f"{TLPARSE} not found: pip install tlparse==0.4.3 into .venv")
        theirs = []
        for _ in range(args.repeat):
            outdir = tmp / "tlparse_out"
            theirs.append(run_child([str(TLPARSE), str(path), "-o", str(outdir), "--overwrite", "--no-browser"])[:2])
            shutil.rmtree(outdir, ignore_errors=True)
        t_wall, t_rss = min(theirs, key=lambda r: r[0])
        print(f"tlparse:     {t_wall:.2f} s wall, {mb / t_wall:.0f} MB/s, peak RSS {t_rss / 2**20:.0f} MB")
        print(f"ratio ours/tlparse: time {wall / t_wall:.3f}x (target <= 0.25), RSS {rss / t_rss:.3f}x (target <= 0.5)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
