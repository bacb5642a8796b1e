"""Ingest throughput on the DuckLake team store with 1, 4, 8 and 20 concurrent writers (and the
embedded store beside it), on the same real bundles.

    python benchmarks/bench_lake_ingest.py [--bundles 40] [--workers 1,4,8,20] [--team-runs N] [--json out.json]

Inputs: the collector bundles in sample_logs/cpu-torch2.13/ (real CPU torch.compile runs), each
unpacked and re-sent under --bundles / 7 new run ids (a rerun of the same job: every file is stored
again for its new run). Each measurement starts from an empty store (a fresh catalog database in a
local PostgreSQL from store/pglocal.py, started here); the bundles are split between K
`compilewatch ingest` processes started together. Printed per K: wall time, bundles/s, files/s,
MB/s, CPU seconds used per wall second by the workers (2.0 means both cores of this machine busy
with our work) and the load average: together they say whether our CPU, the machine's other users or
waiting on the store (PostgreSQL round trips, commits) is the limit. Every run checks that each
bundle's run is stored once, each file once, and that no file failed.

The commits retried per file are what the ingests' own result tables say (the summary line counts
the commits that lost a race with another writer's and ran again). With --team-runs N each
measurement's store first holds N runs of a team's year (benchmarks/gen_team_year.py, built once
embedded and copied into each fresh catalog with `store copy`; not timed): the writers then add
their bundles to a store in use rather than to an empty one.

On DuckLake it also prints the PostgreSQL round trips per stored file, counted by the server
itself: the catalog database logs every statement it receives (`log_statement = all`, one log line
per simple query or extended-protocol execute, each a round trip), and pg_stat_database gives its
transactions (xact_commit + xact_rollback). The count covers the ingest processes from start to
exit, their connecting and attaching included, divided by the files they stored; the statements
are also split by what they touch (claims, file ids, DuckLake's catalog tables, the rest; a
statement is sorted by its first line), and the ROLLBACKs among them are counted apart: a DuckLake
commit that lost a race with another worker's is rolled back and the file written again.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.store import open_store  # noqa: E402
from compilewatch.store.pglocal import LocalPostgres  # noqa: E402

SAMPLES = ROOT / "sample_logs" / "cpu-torch2.13"


def make_bundles(n: int, out: Path) -> list[Path]:
    """n bundle folders: the sample bundles, each under fresh run ids."""
    sources = sorted(SAMPLES.glob("*.tar.gz"))
    unpacked = []
    for s in sources:
        d = out / "src" / s.name.removesuffix(".tar.gz")
        with tarfile.open(s) as tf:
            tf.extractall(d, filter="data")
        inner = [p for p in d.rglob("manifest.json")][0].parent
        unpacked.append(inner)
    bundles = []
    for i in range(n):
        src = unpacked[i % len(unpacked)]
        dst = out / "bundles" / f"{src.name}-{i:03d}"
        shutil.copytree(src, dst)
        m = json.loads((dst / "manifest.json").read_text())
        m["run_id"] = f"{m.get('run_id') or src.name}-rerun{i:03d}"
        (dst / "manifest.json").write_text(json.dumps(m, indent=1))
        bundles.append(dst)
    return bundles


class RoundTrips:
    """The statements and transactions one catalog database received while a block ran, read from the
    server's own log and statistics (module docstring)."""

    # what a statement touches, first match wins; DuckLake names its catalog tables ducklake_*
    KINDS = (("claims", re.compile(r"compilewatch_claim")), ("file_ids", re.compile(r"compilewatch_file_id")),
             ("ducklake_catalog", re.compile(r"ducklake_")))

    def __init__(self, pg: LocalPostgres, dbname: str):
        self.pg, self.dbname = pg, dbname
        self.log = pg.data / "server.log"
        pg.psql(f'ALTER DATABASE "{dbname}" SET log_statement = \'all\'')

    def _xacts(self) -> int:
        return int(self.pg.psql(f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{self.dbname}'"))

    def start(self) -> None:
        self.offset, self.xacts = self.log.stat().st_size, self._xacts()

    def stop(self) -> dict:
        time.sleep(1.0)   # a backend's statistics reach pg_stat_database within a second of its exit
        xacts = self._xacts() - self.xacts - 1   # less the query asking
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            text = f.read().decode(errors="replace")
        counts = dict.fromkeys([k for k, _ in self.KINDS] + ["other"], 0)
        marker = re.compile(rf"^{re.escape(self.dbname)}\|.*?LOG:  (?:statement|execute [^:]*): (.*)$")
        rollbacks = 0   # a DuckLake commit that lost a race is rolled back and its file written again
        for line in text.splitlines():
            m = marker.match(line)
            if m:
                counts[next((k for k, rx in self.KINDS if rx.search(m[1])), "other")] += 1
                rollbacks += m[1].strip() == "ROLLBACK"
        return dict(statements=sum(counts.values()), transactions=xacts, rollbacks=rollbacks, **counts)


# the closing line of `compilewatch ingest`, with the retries it adds when there were any
SUMMARY = re.compile(r"^(\d+) stored, (\d+) duplicate, (?:\d+ skipped \(not logs\), )?(\d+) failed"
                     r".*?(?:, (\d+) commit\(s\) retried after a conflict)?$", re.M)


def summary(out: str) -> dict:
    m = SUMMARY.search(out)
    if not m:
        raise SystemExit(f"no summary line in an ingest's output: {out[-2000:]}")
    return dict(zip(("stored", "duplicate", "failed", "retries"), (int(g or 0) for g in m.groups())))


def team_store(pg: LocalPostgres, name: str, data_path: Path, runs: int, built: Path) -> None:
    """Fill catalog `name` (fresh) with `runs` runs of a team's year: gen_team_year.py builds them
    once in an embedded store at `built`, then copies that store into the catalog."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gen_team_year.py"), "--db", str(built), "--runs", str(runs),
           "--lake", pg.lake_spec(name), "--data-path", str(data_path)]
    subprocess.run(cmd + (["--reuse"] if built.exists() else []), cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def measure(db: str, data_path: Path | None, bundles: list[Path], workers: int,
            trips: RoundTrips | None = None) -> dict:
    env = {**os.environ, "COMPILEWATCH_DB": db}
    if data_path:
        env["COMPILEWATCH_DATA_PATH"] = str(data_path)
    store = open_store(db, data_path)   # migrations are not part of the ingest figure
    with store.read() as con:   # what the store held before: a team's runs (--team-runs)
        base = con.execute("SELECT (SELECT count(*) FROM runs), count(*), coalesce(sum(size_bytes), 0) / 1e6 "
                           "FROM files").fetchall()[0]
    store.close()
    shares = [bundles[k::workers] for k in range(workers)]
    if trips:
        trips.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", "--quiet", *map(str, share)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for share in shares]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if any(p.returncode for p in procs):
        raise SystemExit(f"an ingest failed: {outs}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counted = trips.stop() if trips else None
    told = [summary(out) for out, _ in outs]
    store = open_store(db, data_path)
    with store.read() as con:
        runs, distinct = con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchall()[0]
        files, mb = con.execute("SELECT count(*), sum(size_bytes) / 1e6 FROM files").fetchall()[0]
        stored_once = con.execute("SELECT count(DISTINCT (run_id, sha256)) FROM files").fetchall()[0][0]
    store.close()
    runs, distinct, files, mb = runs - base[0], distinct - base[0], files - base[1], mb - base[2]
    if runs != len(bundles) or distinct != runs or stored_once - base[1] != files:
        raise SystemExit(f"expected {len(bundles)} runs stored once, found {runs} ({distinct} distinct), "
                         f"{files} files of which {stored_once - base[1]} distinct")
    if sum(t["stored"] for t in told) != files or any(t["failed"] for t in told):
        raise SystemExit(f"the ingests said {told}, the store holds {files} new files")
    retries = sum(t["retries"] for t in told)
    out = dict(workers=workers, wall_s=round(wall, 2), bundles_per_s=round(len(bundles) / wall, 2),
               files_per_s=round(files / wall, 1), mb_per_s=round(mb / wall, 2), files=files, mb=round(mb, 1),
               retries=retries, retries_per_file=round(retries / files, 3),
               cpu_per_wall=round(cpu / wall, 2), load_avg=round(os.getloadavg()[0], 1))
    if counted:
        out["round_trips"] = counted
        out["round_trips_per_file"] = {k: round(v / files, 1) for k, v in counted.items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=int, default=40)
    ap.add_argument("--workers", default="1,4,8,20")
    ap.add_argument("--team-runs", type=int, default=0, help="runs each DuckLake store holds before the writers start")
    ap.add_argument("--no-embedded", action="store_true", help="skip the embedded store's figures")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    counts = [int(k) for k in args.workers.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="cw-bench-ingest-"))
    tmp.chmod(0o755)  # the server runs as the postgres user when this runs as root
    pg = LocalPostgres(tmp / "postgres")
    results = []
    try:
        bundles = make_bundles(args.bundles, tmp)
        pg.start()
        # the database's name on each log line, so the count is the benchmark's catalog's alone
        pg.psql("ALTER SYSTEM SET log_line_prefix = '%d|'")
        pg.psql("SELECT pg_reload_conf()")
        print(f"{len(bundles)} bundles{f' into stores of {args.team_runs:,} runs' if args.team_runs else ''}; PostgreSQL on 127.0.0.1:{pg.port}; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.1f} (other users of the machine count too)")
        for k in counts:
            name = f"ingest_{k}"
            pg.create_database(name, fresh=True)
            if args.team_runs:
                team_store(pg, name, tmp / f"lake-{k}", args.team_runs, tmp / "team" / "cw.duckdb")
            r = measure(pg.lake_spec(name), tmp / f"lake-{k}", bundles, k, RoundTrips(pg, name))
            results.append(dict(backend="ducklake", **r))
            per = r["round_trips_per_file"]
            print(f"ducklake  {k} worker(s): {r['wall_s']:6.1f} s  {r['bundles_per_s']:5.2f} bundles/s  "
                  f"{r['files_per_s']:6.1f} files/s  {r['mb_per_s']:6.2f} MB/s  cpu/wall {r['cpu_per_wall']:.2f}  "
                  f"load {r['load_avg']:.1f}", flush=True)
            print(f"          PostgreSQL per file: {per['statements']:.1f} statements ({per['claims']:.1f} claims, "
                  f"{per['file_ids']:.1f} file ids, {per['ducklake_catalog']:.1f} DuckLake catalog, "
                  f"{per['other']:.1f} other), {per['transactions']:.1f} transactions, {per['rollbacks']:.2f} rollbacks; "
                  f"{r['retries_per_file']:.3f} commits retried ({r['retries']} in all)", flush=True)
        if not args.no_embedded:
            for k in counts:
                r = measure(str(tmp / f"emb-{k}" / "cw.duckdb"), None, bundles, k)
                results.append(dict(backend="duckdb", **r))
                print(f"embedded  {k} worker(s): {r['wall_s']:6.1f} s  {r['bundles_per_s']:5.2f} bundles/s  "
                      f"{r['files_per_s']:6.1f} files/s  {r['mb_per_s']:6.2f} MB/s  cpu/wall {r['cpu_per_wall']:.2f}  "
                      f"load {r['load_avg']:.1f}", flush=True)
    finally:
        pg.stop("immediate")
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
