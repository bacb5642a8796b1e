"""Peak DuckDB temp-file spill of a full rollup rebuild, the one a team store pays for in the
migrations' backfill and in benchmarks/gen_team_year.py.

    python benchmarks/gen_team_year.py --db .bench/ty10k/compilewatch.duckdb --runs 10000
    python benchmarks/bench_rebuild_spill.py --db .bench/ty10k/compilewatch.duckdb [--mode backfill|all|layout|layout-whole]

Works on a copy of --db (the original is left as it was). ``--mode backfill`` runs every migration's
backfill (store/derived.py: BACKFILLS), each in a transaction of its own, as a store migrated from before them
does (store/embedded.py: _apply_migrations); ``--mode all`` rebuilds every derived table with
store/derived.py's refresh_all, as gen_team_year.py does; ``--mode layout`` rewrites the two largest
event tables in file order as gen_team_year.py does after its inserts, a range of files per sort and
a transaction per range (``layout-one-transaction``: the ranges in one transaction per table;
``layout-whole``: each table in one sort and one transaction, as it did before). A thread samples the size of the
connection's temp_directory every 20 ms; the peak, the wall time and the peak per step are printed,
with the store's runs and graph breaks, so a figure at another size can be projected from them.
What a statement cannot hold in DuckDB's memory is what spills, so ``--memory-limit`` scaled down
with the runs (100MB on 10,000 runs for the 1 GB a migration has on 100,000) shows at a size that
fits a shared machine what the larger store spills.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compilewatch.store import open_store  # noqa: E402
from compilewatch.store import derived  # noqa: E402
from compilewatch.store.objects import Folder  # noqa: E402

SAMPLE_S = 0.02
LAYOUT_TABLES = ("graph_breaks", "guard_failures")


class Sampler(threading.Thread):
    def __init__(self, folder: Path):
        super().__init__(daemon=True)
        self.folder, self.peak, self.step_peak, self.done = Folder(folder), 0, 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            n = self.folder.total_bytes("")   # none yet: os.walk lists nothing
            self.peak, self.step_peak = max(self.peak, n), max(self.step_peak, n)
            time.sleep(SAMPLE_S)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, type=Path, help="a store built by gen_team_year.py (left unchanged)")
    ap.add_argument("--mode", choices=("backfill", "all", "layout", "layout-one-transaction", "layout-whole"),
                    default="backfill")
    ap.add_argument("--work", type=Path, help="folder for the copy (default: a new one beside --db)")
    ap.add_argument("--memory-limit", help="DuckDB's memory for the rebuild instead of the one it sets (e.g. 100MB "
                                           "on a 10,000-run store: what 1 GB is to a 100,000-run one)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="spill-", dir=args.work or args.db.parent.parent))
    try:
        db = work / args.db.name
        shutil.copy(args.db, db)
        store = open_store(db)
        with store.write() as con:
            runs, gbs = (con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("runs", "graph_breaks"))
            steps = prepare(con, args.mode)
            if args.memory_limit:
                con.execute(f"SET memory_limit = '{args.memory_limit}'")
            temp = Path(con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0] or f"{db}.tmp")
            temp = temp if temp.is_absolute() else Path.cwd() / temp
            settings = {k: con.execute(f"SELECT current_setting('{k}')").fetchall()[0][0]
                        for k in ("memory_limit", "threads", "preserve_insertion_order", "max_temp_directory_size")}
            print(f"{runs:,} runs, {gbs:,} graph breaks; mode {args.mode}; temp {temp}; {settings}", flush=True)
            sampler = Sampler(temp)
            sampler.start()
            t0 = time.perf_counter()
            for name, step in steps:
                sampler.step_peak, t = 0, time.perf_counter()
                step(con)
                print(f"  {name:<44} {time.perf_counter() - t:7.1f} s  peak temp {sampler.step_peak / 2**20:9.1f} MiB",
                      flush=True)
            wall = time.perf_counter() - t0
            sampler.done.set()
            sampler.join()
        print(f"peak temp-dir size {sampler.peak / 2**20:,.1f} MiB over {wall:.1f} s "
              f"({sampler.peak / max(runs, 1) / 2**10:,.1f} KiB per run)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def prepare(con, mode: str):
    """(name, callable(con)) per step of the rebuild, with the connection set as that rebuild sets it."""
    if mode.startswith("layout"):   # gen_team_year.py's rewrite of its largest tables in file order
        import gen_team_year
        con.execute("SET threads = 2")
        con.execute("SET memory_limit = '2GB'")
        per_sort = None if mode == "layout-whole" else gen_team_year.FILES_PER_SORT
        return [(f"file order of {t}", partial(gen_team_year.lay_out_in_file_order, only=(t,), files_per_sort=per_sort,
                                               one_transaction=mode != "layout"))
                for t in LAYOUT_TABLES]
    if mode == "all":
        con.execute("SET threads = 2")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET memory_limit = '2GB'")   # as gen_team_year.py sets its writer
        return [("refresh_all", derived.refresh_all)]
    from compilewatch.store.embedded import MIGRATION_MEMORY
    con.execute(f"SET memory_limit = '{MIGRATION_MEMORY}'")

    def backfill(name):
        def run(con):
            con.execute("BEGIN")
            derived.after_migration(con, name)
            con.execute("COMMIT")
        return run
    return [(f"backfill {name}", backfill(name)) for name in derived.BACKFILLS]


if __name__ == "__main__":
    sys.exit(main())
