"""Several processes ingesting at once (CLI runs, dashboard uploads, inbox workers): every file is
stored exactly once, and the same file raced by several of them is stored once, not N times."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))


def test_racing_ingests_store_each_file_once(tmp_path):
    db = tmp_path / "store" / "cw.duckdb"
    files = [TRACE, *TEXTS]
    procs = [subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", "--quiet", "--db", str(db), *map(str, files)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    expected = json.loads(subprocess.run([sys.executable, "-m", "compilewatch", "summarize", "--json", *map(str, files)],
                                         cwd=REPO, capture_output=True, text=True, check=True).stdout)
    con = duckdb.connect(str(db), read_only=True)
    try:
        n_files, n_distinct = con.execute("SELECT count(*), count(DISTINCT sha256) FROM files").fetchall()[0]
        breaks = con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0]
        recompiles = con.execute("SELECT count(*) FROM recompiles").fetchall()[0][0]
    finally:
        con.close()
    assert n_files == n_distinct == len(files)
    assert breaks == expected["graph_breaks"] and recompiles == expected["recompiles"]
    # each file was stored by exactly one racer; the two others were told it is a duplicate
    totals = [re.search(r"^(\d+) stored, (\d+) duplicate, (\d+) failed", o[0], re.M).groups() for o in outs]
    assert sum(int(t[0]) for t in totals) == len(files)
    assert sum(int(t[1]) for t in totals) == 2 * len(files)
    assert all(t[2] == "0" for t in totals)
