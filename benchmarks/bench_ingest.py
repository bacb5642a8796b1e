"""compilewatch ingest against its references, in one run: tlparse for TORCH_TRACE, the parse-only
floor for TORCH_LOGS text, one worker for many bundles.

    .venv/bin/python benchmarks/bench_ingest.py [--trace-mb 111] [--text-mb 105] [--repeat 3]
                                                [--big-mb 1000] [--workers 1,2] [--skip-tlparse]
                                                [--inputs DIR] [--range-mb 8,4,2] [--team-db D]
                                                [--text-sizes 210,525]

Inputs are built from real logs only (benchmarks/real_inputs.py) in a temp folder, removed after;
--inputs DIR takes them from DIR instead (built there by real_inputs.py --out DIR and copied to a
machine that lacks the logs they are built from).
Every command runs in a fresh child process measured with wait4() (wall time, peak RSS); the best
of --repeat runs is printed for each, with the ratio to its reference measured in the same run:
  1. TORCH_TRACE: `compilewatch ingest FILE --db fresh.duckdb` (the whole product path: parse, keep
     the per-compile artifacts compressed, store; with --workers 1, and with the default, the file
     read in ranges by one process per core) vs `tlparse FILE -o OUT --overwrite --no-browser`
     (PyPI tlparse 0.4.3). Targets: <= 0.15x wall, <= 0.35x peak RSS.
  2. TORCH_LOGS text: `compilewatch ingest` (file to committed rows; with --workers 1, and with the
     default, one process per core parsing the file in ranges) and `compilewatch summarize` against
     the parse-only floor (`parse_text` into a sink that only counts). Target: >= 100 MB/s. Beside
     them, the ingest's CPU time (its parse workers' included) and the wall time that CPU time
     allows at best on this machine's cores, and an ingest of the log's first MB into a fresh
     store: what an ingest costs whatever the file's size, against the time 100 MB/s allows the
     whole file.
     --range-mb: the same ingest again with ranges of at least that many MB (the default 16).
  3. --big-mb: one trace and one text log of that size ingested once each; target < 400 MB peak RSS.
     --text-sizes: text logs of those sizes ingested (best of --repeat each): the rate against size.
  4. --team-db D: single bundles of sample_logs/ ingested one `compilewatch ingest` at a time into a
     copy of D (a store at an organisation's scale, built by gen_team_year.py) and into a small store,
     alternating: seconds per bundle, and the ratio of the medians.
  5. small: a bundle and three small sample_logs/ folders, `compilewatch ingest` with the default
     workers (under 8 MB to parse: parsed in one process) against parse workers started whatever
     the size (the rule before); medians of --repeat, alternately.
  6. --workers: `compilewatch ingest sample_logs/ --workers N` into a fresh store for each N: files/s,
     MB/s and the speed-up over the first N. The peak RSS printed is the largest single process.
     The first N's store is then re-parsed whole (`compilewatch reingest --all`), against its ingest.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
# the installed command; where only the package is installed (no console script), the same as a module
CW = [str(VENV_BIN / "compilewatch")] if (VENV_BIN / "compilewatch").exists() else [sys.executable, "-m", "compilewatch"]

PARSE_ONLY = r"""
import sys
from compilewatch.ingest.text import parse_text
from compilewatch.ingest.records import CountingSink
with open(sys.argv[1], "rb", buffering=1 << 20) as f:
    parse_text(f, CountingSink())
"""


class Run(NamedTuple):
    wall: float     # seconds
    rss: float      # peak RSS of the largest process, MB
    cpu: float      # user + system CPU seconds of the process and the workers it waited for


def measure(cmd: list[str], ok=(0, 1)) -> Run:
    """One child process, measured; exits on failure (an exit status not in `ok`: an ingest exits
    1 on partial files, the public logs hold deliberately corrupted ones). wait4's usage counts the
    child's own waited-for children too: an ingest's parse workers are in `cpu`."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        # run outside the checkout: its compilewatch/ folder would shadow an installed package
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        if rc not in ok:
            err.seek(0)
            sys.exit(f"{' '.join(cmd[:3])} failed ({rc}): {err.read().decode(errors='replace')[-2000:]}")
    return Run(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def files_in(db: Path, where: str = "true") -> int:
    """The files rows of the store at db that match `where`."""
    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT count(*) FROM files WHERE {where}").fetchone()[0]
    finally:
        con.close()


def stored(db: Path) -> None:
    """Exit unless the ingest into db stored its file: a run that failed (out of memory, say) is
    fast and small, and must not be reported as a figure."""
    if files_in(db, "status IN ('ok', 'partial')") < 1:
        sys.exit(f"the ingest into {db} stored no file: its figures are not reported")


def best(cmd_for_run, repeat: int, ok=(0, 1)) -> Run:
    """The run of `repeat` with the fastest wall time (others' load only ever slows a run down)."""
    return min((measure(cmd_for_run(i), ok) for i in range(repeat)), key=lambda r: r.wall)


INPUTS: Path | None = None   # --inputs: a folder of inputs built before (real_inputs.py --out), kept


def build(kind: str, mb: float, folder: Path, reuse: bool = True) -> tuple[Path, str]:
    """Build one input with real_inputs.py in a child process: the real logs it reads stay out of
    this process, whose memory a child forked from it would otherwise start its peak RSS with.
    With --inputs, the one built there before (on a machine that has no sample_logs/ to build it
    from) is copied in instead, unless `reuse` is off (--big-mb builds inputs of its own size)."""
    name = "trace.log" if kind == "trace" else "torch_logs.txt"
    if INPUTS is not None and reuse:
        shutil.copyfile(INPUTS / name, folder / name)
        return folder / name, f"{(folder / name).stat().st_size / 1e6:.1f} MB from {INPUTS / name}"
    args = ["--trace-mb", str(mb), "--text-mb", "0"] if kind == "trace" else ["--trace-mb", "0", "--text-mb", str(mb)]
    out = subprocess.run([sys.executable, str(HERE / "real_inputs.py"), "--out", str(folder), *args],
                         capture_output=True, text=True, check=True).stdout.strip()
    return folder / name, out.split(": ", 1)[1]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_trace(tmp: Path, mb_target: float, repeat: int, tlparse: bool) -> None:
    trace, what = build("trace", mb_target, tmp)
    mb = trace.stat().st_size / 1e6
    print(f"TORCH_TRACE {what} ({load()})")
    # the default: the file read in ranges by one process per core (ingest/trace_ranges.py); and in one
    ow, orss, _ = best(lambda i: CW + ["ingest", "--quiet", "--workers", "1", str(trace), "--db",
                                       str(tmp / f"o{i}" / "db.duckdb")], repeat)
    w, r, _ = best(lambda i: CW + ["ingest", "--quiet", str(trace), "--db", str(tmp / f"t{i}" / "db.duckdb")], repeat)
    for i in range(repeat):
        stored(tmp / f"o{i}" / "db.duckdb")
        stored(tmp / f"t{i}" / "db.duckdb")
    print(f"  ingest --workers 1   {ow:6.2f} s  {orss:6.0f} MB peak RSS  {mb / ow:6.1f} MB/s  (one process)")
    print(f"  compilewatch ingest  {w:6.2f} s  {r:6.0f} MB peak RSS  {mb / w:6.1f} MB/s  "
          f"({os.cpu_count()} cores, the file read in ranges)")
    if tlparse:
        tw, tr, _ = best(lambda i: [str(VENV_BIN / "tlparse"), str(trace), "-o", str(tmp / "tl"), "--overwrite",
                                    "--no-browser"], repeat)
        print(f"  tlparse 0.4.3        {tw:6.2f} s  {tr:6.0f} MB peak RSS  {mb / tw:6.1f} MB/s")
        print(f"  ratio to tlparse: wall {w / tw:.3f}x (target <= 0.15), peak RSS {r / tr:.3f}x (target <= 0.35)")
    print(f"  ({load()} after)")
    trace.unlink()


RANGED = r"""
import sys
from compilewatch.ingest import text_ranges
text_ranges.MIN_RANGE_BYTES = int(sys.argv[1])
from compilewatch.cli import main
sys.argv = ["compilewatch", "ingest", "--quiet", sys.argv[2], "--db", sys.argv[3]]
sys.exit(main())
"""


def bench_text(tmp: Path, mb_target: float, repeat: int, range_mbs: list[float] = ()) -> None:
    text, what = build("text", mb_target, tmp)
    mb = text.stat().st_size / 1e6
    print(f"TORCH_LOGS text {what} ({load()})")
    env_py = [sys.executable, "-c", PARSE_ONLY, str(text)]
    fw, fr, fcpu = best(lambda i: env_py, repeat, ok=(0,))
    sw, sr, _ = best(lambda i: CW + ["summarize", str(text)], repeat)
    # one process, and the default: one per core, the file parsed in ranges (ingest/text_ranges.py)
    ow, orss, _ = best(lambda i: CW + ["ingest", "--quiet", "--workers", "1", str(text), "--db",
                                       str(tmp / f"o{i}" / "db.duckdb")], repeat)
    iw, ir, icpu = best(lambda i: CW + ["ingest", "--quiet", str(text), "--db", str(tmp / f"x{i}" / "db.duckdb")], repeat)
    # what an ingest costs whatever the file's size: the log's first MB into a fresh store
    head = tmp / "head.txt"
    with open(text, "rb") as f:
        block = f.read(1 << 20)
    head.write_bytes(block[:block.rfind(b"\n") + 1])
    hw, _, _ = best(lambda i: CW + ["ingest", "--quiet", str(head), "--db", str(tmp / f"h{i}" / "db.duckdb")], repeat)
    for i in range(repeat):
        stored(tmp / f"o{i}" / "db.duckdb")
        stored(tmp / f"x{i}" / "db.duckdb")
        stored(tmp / f"h{i}" / "db.duckdb")
    print(f"  parse-only floor     {fw:6.2f} s  {fr:6.0f} MB peak RSS  {mb / fw:6.1f} MB/s")
    print(f"  compilewatch summarize {sw:4.2f} s  {sr:6.0f} MB peak RSS  {mb / sw:6.1f} MB/s  "
          f"= {fw / sw:.2f}x the floor's rate")
    print(f"  ingest --workers 1   {ow:6.2f} s  {orss:6.0f} MB peak RSS  {mb / ow:6.1f} MB/s  "
          f"= {fw / ow:.2f}x the floor's rate")
    print(f"  compilewatch ingest  {iw:6.2f} s  {ir:6.0f} MB peak RSS  {mb / iw:6.1f} MB/s  "
          f"= {fw / iw:.2f}x the floor's rate (target >= 100 MB/s; {os.cpu_count()} cores, the file in ranges)")
    # However the work is spread, N cores cannot end it sooner than its CPU time over N: the bound
    # any schedule of this ingest meets, less noisy than a wall time on a shared machine.
    cores = os.cpu_count() or 1
    print(f"  CPU of that ingest   {icpu:6.2f} CPU-s, its parse workers included (the parse-only floor {fcpu:.2f} "
          f"CPU-s): on {cores} cores no schedule ends it before {icpu / cores:.2f} s = {mb / (icpu / cores):.1f} MB/s")
    # What does not grow with the file, against the time 100 MB/s allows the whole of it.
    print(f"  ingest of its first MB {hw:4.2f} s  (start, store creation, commit, refresh and close, whatever the "
          f"file's size: {hw / (mb / 100):.0%} of the {mb / 100:.2f} s that 100 MB/s allows this file)")
    # --range-mb: the same ingest with ranges of at least N MB instead of text_ranges.MIN_RANGE_BYTES
    from compilewatch.ingest import text_ranges
    from compilewatch.ingest.workers import default_workers   # the ingest's own count of workers
    for rmb in range_mbs:
        size = int(rmb * (1 << 20))
        parts = max(1, text_ranges.range_count(text.stat().st_size, default_workers(), size))
        rw, rr, _ = best(lambda i: [sys.executable, "-c", RANGED, str(size), str(text),
                                    str(tmp / f"m{rmb}_{i}" / "db.duckdb")], repeat)
        for i in range(repeat):
            stored(tmp / f"m{rmb}_{i}" / "db.duckdb")
        print(f"  ranges of >= {rmb:g} MB ({parts} ranges) {rw:6.2f} s  {rr:6.0f} MB peak RSS  {mb / rw:6.1f} MB/s")
    print(f"  ({load()} after)")
    text.unlink()


def bench_big(tmp: Path, mb_target: float) -> None:
    for kind, name in (("trace", "TORCH_TRACE"), ("text", "TORCH_LOGS text")):
        f, _ = build(kind, mb_target, tmp / "big", reuse=False)
        mb = f.stat().st_size / 1e6
        # the log just written goes to disk first: a user's log is on disk before it is ingested, and
        # a GB of dirty pages written back during the timed ingest moved it by up to a fifth
        os.sync()
        w, r, cpu = measure(CW + ["ingest", "--quiet", str(f), "--db", str(tmp / "big" / "db.duckdb")])
        stored(tmp / "big" / "db.duckdb")
        print(f"{name} {mb:.0f} MB: compilewatch ingest {w:6.1f} s  {mb / w:6.1f} MB/s  {r:6.0f} MB peak RSS "
              f"(target < 400), {cpu:.1f} CPU-s: on {os.cpu_count()} cores no schedule ends it before "
              f"{cpu / os.cpu_count():.1f} s = {mb * os.cpu_count() / cpu:.1f} MB/s ({load()})")
        shutil.rmtree(tmp / "big")


def bench_text_sizes(tmp: Path, sizes: list[float], repeat: int) -> None:
    """The text ingest's rate against the log's size: what an ingest costs whatever the size (start,
    store creation, commit, refresh, close) weighs less the larger the log."""
    print(f"TORCH_LOGS text ingest by size, best of {repeat} ({load()})")
    for mb_target in sizes:
        f, _ = build("text", mb_target, tmp / "sized", reuse=False)
        mb = f.stat().st_size / 1e6
        os.sync()   # as in bench_big: the log on disk before it is ingested
        w, r, cpu = best(lambda i: CW + ["ingest", "--quiet", str(f), "--db", str(tmp / "sized" / f"db{i}" / "db.duckdb")],
                         repeat)
        for i in range(repeat):
            stored(tmp / "sized" / f"db{i}" / "db.duckdb")
        print(f"  {mb:7.0f} MB  {w:6.2f} s  {mb / w:6.1f} MB/s  {r:6.0f} MB peak RSS  {cpu:6.2f} CPU-s "
              f"(on {os.cpu_count()} cores at best {mb * os.cpu_count() / cpu:.1f} MB/s)")
        shutil.rmtree(tmp / "sized")
    print(f"  ({load()} after)")


SPLIT = r"""
import json, sys, time
from compilewatch.store.lean import pandas_kept_out
from compilewatch.store import open_store
from compilewatch.ingest import loader
spent = {"parse": 0.0, "write": 0.0, "parse_cpu": 0.0, "write_cpu": 0.0}
def timed(fn, key):
    def run(*a, **k):
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t
            spent[key + "_cpu"] += time.process_time() - c
    return run
loader.parse_and_stage = timed(loader.parse_and_stage, "parse")
loader.commit_staged = timed(loader.commit_staged, "write")
with pandas_kept_out():
    loader.ingest_paths(open_store(sys.argv[2]), [sys.argv[1]], workers=1)
print(json.dumps(spent))
"""


def bench_workers(tmp: Path, counts: list[int]) -> None:
    bundles = sorted((REPO / "sample_logs").glob("*/*.tar.gz"))
    mb = sum(b.stat().st_size for b in bundles) / 1e6
    files = 0
    first = None
    for n in counts:
        db = tmp / f"w{n}" / "db.duckdb"
        w, r, _ = measure(CW + ["ingest", "--quiet", "--workers", str(n), str(REPO / "sample_logs"), "--db", str(db)])
        if not files:
            out = subprocess.run(CW + ["stats", "--db", str(db), "--json"], capture_output=True, text=True,
                                 check=True, cwd=tmp)
            files = json.loads(out.stdout)["files"]
        first = first or w
        print(f"  {n} worker(s): {w:6.1f} s  {files / w:5.1f} files/s  {mb / w:5.2f} MB/s of bundles  "
              f"{r:5.0f} MB peak RSS (largest process)  speed-up {first / w:.2f}x  ({load()})")
        if n == counts[0]:
            # every stored file parsed again from its raw copy, as after an upgrade of the parsers
            rw, rr, _ = measure(CW + ["reingest", "--all", "--db", str(db)])
            print(f"  reingest --all of that store: {rw:6.1f} s  {rr:5.0f} MB peak RSS  "
                  f"= {rw / w:.2f}x its ingest with {n} worker(s)  ({load()})")
        shutil.rmtree(db.parent)
    # What more cores would give: the parse is spread over the workers, the writing is not.
    out = subprocess.run([sys.executable, "-c", SPLIT, str(REPO / "sample_logs"), str(tmp / "split" / "db.duckdb")],
                         capture_output=True, text=True, check=True, cwd=tmp)
    spent = json.loads(out.stdout.strip().splitlines()[-1])
    p, w = spent["parse_cpu"], spent["write_cpu"]
    # CPU seconds, not wall: on a shared machine other people's load stretches wall time unevenly
    print(f"  in one process: parse (with hashing and the raw copy) {p:.1f} CPU-s ({spent['parse']:.1f} s wall), "
          f"the writer {w:.1f} CPU-s ({spent['write']:.1f} s wall); with 16 workers the parse spreads over 16 cores "
          f"and the one writer does not: ~{max(p / 16, w):.1f} s at best, ~{(p + w) / max(p / 16, w):.1f}x one "
          f"process  ({load()})")


POOL_ALWAYS = r"""
import sys
from compilewatch.ingest import workers
from compilewatch.cli import main
workers.POOL_MIN_BYTES = 0   # parse workers for any input, as before workers.pool_pays_off
sys.argv = ["compilewatch", *sys.argv[1:]]
sys.exit(main())
"""


def bench_small(tmp: Path, repeat: int) -> None:
    """`compilewatch ingest` of a bundle and of small folders, as a CI job or a user runs it (default
    workers: files holding under workers.POOL_MIN_BYTES to parse are parsed in the writer's process),
    against the same command with parse workers started whatever the size: alternately, medians."""
    import statistics

    from compilewatch.ingest.archives import unpacked_size
    folders = [REPO / "sample_logs" / d for d in ("cpu-torch2.13-versions", "cpu-torch2.13",
                                                   "gpu-h100-torch2.11-cudagraphs")]
    sets = [[min(folders[1].glob("*.tar.gz"), key=lambda b: b.stat().st_size)], *([f] for f in folders)]
    print(f"Small inputs, {repeat} runs each, into fresh stores ({load()})")
    for paths in sets:
        mb = sum(unpacked_size(b) for p in paths for b in ([p] if p.is_file() else p.glob("*.tar.gz"))) / 1e6
        times: dict[str, list[float]] = {"default": [], "workers always": []}
        for i in range(repeat):
            for how, cmd in (("default", CW + ["ingest"]), ("workers always", [sys.executable, "-c", POOL_ALWAYS, "ingest"])):
                db = tmp / "small" / how.replace(" ", "-") / "db.duckdb"
                times[how].append(measure(cmd + ["--quiet", *map(str, paths), "--db", str(db)]).wall)
                stored(db)
                shutil.rmtree(db.parent)
        d, a = statistics.median(times["default"]), statistics.median(times["workers always"])
        name = paths[0].name if paths[0].is_file() else paths[0].name + "/"
        print(f"  {name} ({mb:.1f} MB unpacked): {d:5.2f} s against {a:5.2f} s with workers always "
              f"= {d / a:.2f}x  ({load()})")


def bench_team_store(tmp: Path, team_db: Path, count: int) -> None:
    """One bundle at a time, as CI jobs upload them, into a copy of a store at an organisation's
    scale (gen_team_year.py) and into a small one, alternating: what the store's size adds."""
    import statistics
    copy = tmp / "team" / team_db.name
    shutil.copytree(team_db.parent, copy.parent, ignore=shutil.ignore_patterns("*.lock", "*.tmp", "tmp"))
    small = tmp / "small" / "db.duckdb"
    bundles = sorted((REPO / "sample_logs").glob("*/*.tar.gz"))
    # one ingest into each first, untimed: a pending migration, the small store's creation, and
    # the copy's first reads from a disk cache that copying it did not fill (~1 s more here)
    for db in (copy, small):
        measure(CW + ["ingest", "--quiet", str(bundles[-1]), "--db", str(db)])
    runs = json.loads(subprocess.run(CW + ["stats", "--db", str(copy), "--json"], capture_output=True, text=True,
                                     check=True, cwd=tmp).stdout)["runs"]
    print(f"One bundle per ingest into a copy of {team_db} ({runs:,} runs) and into a small store ({load()})")
    team, fresh = [], []
    for b in bundles[:-1]:
        if len(team) == count:
            break
        before = files_in(copy)
        tw, tr, _ = measure(CW + ["ingest", "--quiet", str(b), "--db", str(copy)])
        sw, _, _ = measure(CW + ["ingest", "--quiet", str(b), "--db", str(small)])
        if files_in(copy) <= before:   # stored there already: that was a duplicate's time
            print(f"  {b.parent.name}/{b.name}: stored in that store already, not counted")
            continue
        team.append(tw)
        fresh.append(sw)
        print(f"  {b.parent.name}/{b.name}: {tw:5.2f} s ({tr:4.0f} MB peak RSS) against {sw:5.2f} s")
    t, f = statistics.median(team), statistics.median(fresh)
    print(f"  median {t:.2f} s against {f:.2f} s: {t / f:.2f}x the small store's  ({load()} after)")
    shutil.rmtree(copy.parent)


def compiled() -> None:
    """Bytecode for every module of the checkout, as an installed wheel has it (scripts/setup.sh
    writes it too): a source edited since is compiled again at every command, ~0.1 s of each
    measured run that no installed copy pays."""
    rooms = [p.parent.name for p in sorted(REPO.glob("*/__init__.py"))]   # pyproject's package-dir folders
    subprocess.run([sys.executable, "-m", "compileall", "-q", *rooms], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace-mb", type=float, default=111)
    ap.add_argument("--text-mb", type=float, default=105)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-mb", type=float, default=0, help="also ingest a trace and a text log of this size")
    ap.add_argument("--workers", default="", help="comma-separated worker counts for the sample_logs/ folder")
    ap.add_argument("--skip-tlparse", action="store_true")
    ap.add_argument("--text-sizes", default="", help="comma-separated MB: also ingest text logs of these sizes")
    ap.add_argument("--only", choices=("trace", "text", "sizes", "big", "workers", "team", "small"), action="append")
    ap.add_argument("--team-db", type=Path, help="a store built by gen_team_year.py: ingest single bundles "
                                                 "into a copy of it (the copy needs its size free on disk)")
    ap.add_argument("--team-bundles", type=int, default=6)
    ap.add_argument("--range-mb", default="", help="comma-separated: also ingest the text log in ranges of "
                                                   "at least this many MB (the default is 16)")
    ap.add_argument("--inputs", type=Path, help="take trace.log and torch_logs.txt from this folder "
                                                "(real_inputs.py --out) instead of building them")
    args = ap.parse_args()
    global INPUTS
    INPUTS = args.inputs
    only = set(args.only or ("trace", "text", "big", "small", "workers"))
    compiled()
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-"))
    try:
        if "trace" in only:
            bench_trace(tmp, args.trace_mb, args.repeat, not args.skip_tlparse)
        if "text" in only:
            bench_text(tmp, args.text_mb, args.repeat, [float(x) for x in args.range_mb.split(",") if x])
        if "sizes" in only and args.text_sizes:
            bench_text_sizes(tmp, [float(x) for x in args.text_sizes.split(",")], args.repeat)
        if "big" in only and args.big_mb:
            bench_big(tmp, args.big_mb)
        if "team" in only and args.team_db:
            bench_team_store(tmp, args.team_db.resolve(), args.team_bundles)
        if "small" in only:
            bench_small(tmp, args.repeat)
        if "workers" in only and args.workers:
            print(f"sample_logs/: {len(list((REPO / 'sample_logs').glob('*/*.tar.gz')))} bundles")
            bench_workers(tmp, [int(x) for x in args.workers.split(",")])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
