"""The command line, end to end, on real logs (tests/fixtures/*: see their READMEs)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXT = REPO / "tests" / "fixtures" / "text" / "torch2.13_all.log"
EXE = [sys.executable, "-m", "compilewatch"]


def cw(*args, **kw):
    return subprocess.run([*EXE, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300, **kw)


def test_summarize_json_has_the_documented_keys_and_counts():
    r = cw("summarize", TRACE, TEXT, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    for key in ("files", "torch_version", "graph_breaks", "unique_graph_breaks", "recompiles", "recompiled_functions",
                "guard_failures", "limit_hits", "compile_ids", "failures", "errors"):
        assert key in s
    assert s["files"] == 2
    assert s["torch_version"].startswith("2.13")
    assert s["graph_breaks"] >= 2 and 1 <= s["unique_graph_breaks"] <= s["graph_breaks"]
    assert s["recompiles"] == sum(s["recompiled_functions"].values()) > 0
    assert s["guard_failures"].get("size_mismatch", 0) > 0
    assert s["errors"] == 0


def test_ingest_stores_what_summarize_counts_and_twice_adds_nothing(tmp_path):
    db = tmp_path / "s" / "cw.duckdb"
    s = json.loads(cw("summarize", TRACE, "--json").stdout)
    r = cw("ingest", TRACE, "--db", db, "--model", "toy", "--label", "v1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 stored, 0 duplicate, 0 failed" in r.stdout
    r2 = cw("ingest", TRACE, "--db", db)
    assert "0 stored, 1 duplicate" in r2.stdout
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0] == s["graph_breaks"]
        assert con.execute("SELECT count(*) FROM recompiles").fetchall()[0][0] == s["recompiles"]
        assert con.execute("SELECT model, label, torch_version FROM runs").fetchall()[0][:2] == ("toy", "v1")
        assert con.execute("SELECT count(*) FROM files").fetchall()[0][0] == 1
    finally:
        con.close()


def test_check_is_a_ci_gate():
    s = json.loads(cw("summarize", TRACE, "--json").stdout)
    ok = cw("check", TRACE, "--max-graph-breaks", s["graph_breaks"], "--max-recompiles", s["recompiles"])
    assert ok.returncode == 0 and "passed" in ok.stdout
    bad = cw("check", TRACE, "--max-graph-breaks", 0, "--max-recompiles", 0)
    assert bad.returncode == 1
    assert f"{s['graph_breaks']} graph breaks > allowed 0" in bad.stdout


def test_strict_fails_on_a_corrupted_log_and_says_why(tmp_path):
    lines = TEXT.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "corrupt.log"
    good = TRACE.read_bytes()
    import gzip
    trace_lines = gzip.decompress(good).splitlines(keepends=True)
    # Cut one JSON envelope in half: a json error, the rest still parses.
    i = next(i for i, l in enumerate(trace_lines) if b'"compilation_metrics"' in l)
    trace_lines[i] = trace_lines[i][: len(trace_lines[i]) // 2] + b"\n"
    bad.write_bytes(b"".join(trace_lines))
    r = cw("ingest", bad, "--db", tmp_path / "db" / "x.duckdb", "--strict")
    assert r.returncode == 1 and "--strict" in r.stdout
    r = cw("ingest", bad, "--db", tmp_path / "db2" / "x.duckdb")
    assert r.returncode == 0 and "partial" in r.stdout
    assert lines  # the text fixture is present


@pytest.mark.parametrize("command", [("ingest", "--db", "{db}"), ("summarize", "--json"),
                                     ("check", "--max-graph-breaks", "0", "--max-recompiles", "0")])
def test_a_missing_path_is_bad_input_named_with_exit_2(tmp_path, command):
    """(Seen: `summarize /no/such --json` printed all-zero counts and exit 0; `check` "passed".)"""
    missing = tmp_path / "no" / "such" / "file.log"
    args = [a.replace("{db}", str(tmp_path / "db" / "x.duckdb")) for a in command[1:]]
    r = cw(command[0], TRACE, missing, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"no such file or folder: {missing}" in r.stderr
    assert "passed" not in r.stdout and '"graph_breaks"' not in r.stdout
    assert not (tmp_path / "db").exists()   # refused before anything was written
