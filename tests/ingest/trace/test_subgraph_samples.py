"""tlparse's public vLLM and regional-compilation samples (tests/fixtures/trace/tlparse, byte for byte
from tlparse's tests/inputs): each ingests clean under --strict, and the subgraph fields stored are
the ones the files hold. Every expectation is read from the file itself here (its envelopes and
payloads decoded with json), never written down by hand."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from trace_support import FIXTURES, parse_path

from compilewatch.ingest.formats import subgraphs
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

SAMPLES = sorted((FIXTURES / "tlparse").glob("*.log"))
_PREFIX = re.compile(r"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]+\] ")


def records(path) -> list[tuple[int, dict, str | None]]:
    """(line, envelope, payload) of every record of a trace, read with json alone."""
    out = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        m = _PREFIX.match(line)
        if not m:
            continue
        env = json.loads(line[m.end():])
        payload = []
        for more in lines[i + 1:]:
            if not more.startswith("\t"):
                break
            payload.append(more[1:])
        out.append((i + 1, env, "\n".join(payload) if "has_payload" in env else None))
    return out


def expected(path) -> dict:
    """What the file holds, by line: a record's subgraph name, the compile start it follows (vLLM's
    pieces), a post-grad pass's index and name; and the compile starts' payloads."""
    by_line, starts, piece = {}, [], None
    for line, env, payload in records(path):
        art = (env.get("artifact") or {}).get("name")
        dump = (env.get("graph_dump") or {}).get("name")
        if art == "vllm_compilation_config":
            piece = None
        if art == "vllm_piecewise_compile_start":
            piece = line
            starts.append((line, json.loads(payload)))
        m = re.fullmatch(r"vllm_post_grad\.(\d+)\.(.+)", dump or "")
        pattern = dump[len("vllm_patterns."):] if dump and dump.startswith("vllm_patterns.") else None
        by_line[line] = {"subgraph_name": env.get("subgraph_name"), "piece_line": piece,
                         "pass_index": int(m.group(1)) if m else None,
                         "pass_name": m.group(2) if m else pattern}
    return {"by_line": by_line, "starts": starts}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_parses_clean_with_its_subgraph_fields(path):
    want = expected(path)
    sink = parse_path(path)
    assert sink.errors == []
    stats = sink.metadata["trace_stats"]
    assert stats["unknown_keys"] == {} and stats["unknown_events"] == {}
    arts = sink.rows["artifacts"]
    assert len(arts) == len(want["by_line"])     # every record of these files is an artifact
    for a in arts:
        got = {k: a.get(k) for k in ("subgraph_name", "piece_line", "pass_index", "pass_name")}
        assert got == want["by_line"][a["line_no"]], a["line_no"]
    starts = sink.rows.get("piecewise_compiles", [])
    assert [s["line_no"] for s in starts] == [line for line, _ in want["starts"]]
    for s, (_, info) in zip(starts, want["starts"]):
        assert (s["piecewise_index"], s["submod_name"], s["total_pieces"], s["range_start"], s["range_end"],
                s["is_single_size"], s["is_cudagraph_size"]) == (
            info["piecewise_index"], info["submod_name"], info["total_piecewise_compiles"],
            info["compile_range_start"], info["compile_range_end"], info["is_single_size"],
            info["is_cudagraph_capture_size"])
        assert s["compile_range"] == subgraphs.compile_range(info["compile_range_start"], info["compile_range_end"],
                                                             info["is_single_size"])


def test_the_samples_hold_what_they_are_kept_for():
    """Each sample has the records its README names, counted from the file: two named regional
    subgraphs, post-grad passes and their patterns, and vLLM compile starts."""
    def count(name, test):
        return sum(1 for _, env, _ in records(FIXTURES / "tlparse" / name) if test(env))
    assert count("subgraph_name.log", lambda e: "subgraph_name" in e) == 2
    assert count("vllm_post_grad_diff.log",
                 lambda e: (e.get("graph_dump") or {}).get("name", "").startswith("vllm_post_grad.")) == 2
    assert count("vllm_sample_tail.log",
                 lambda e: (e.get("artifact") or {}).get("name") == "vllm_piecewise_compile_start") == 2


def test_strict_ingest_stores_the_fields(tmp_path):
    db = tmp_path / "cw.duckdb"
    done = subprocess.run([sys.executable, "-m", "compilewatch", "ingest", "--db", str(db), "--strict", "--quiet",
                           *map(str, SAMPLES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    with open_store(db).read() as con:
        for path in SAMPLES:
            want = expected(path)
            run = con.execute("SELECT run_id FROM files WHERE original_name = ?", [path.name]).fetchone()[0]
            stored = {r[0]: {"subgraph_name": r[1], "piece_line": r[2], "pass_index": r[3], "pass_name": r[4]}
                      for r in con.execute("SELECT line_no, subgraph_name, piece_line, pass_index, pass_name "
                                           "FROM artifacts WHERE run_id = ?", [run]).fetchall()}
            assert stored == want["by_line"], path.name
            starts = con.execute("SELECT line_no, piecewise_index, submod_name FROM piecewise_compiles "
                                 "WHERE run_id = ? ORDER BY line_no", [run]).fetchall()
            assert starts == [(line, i["piecewise_index"], i["submod_name"]) for line, i in want["starts"]]


def test_reingest_replaces_the_pieces_once(tmp_path):
    store = open_store(tmp_path / "cw.duckdb")
    tail = FIXTURES / "tlparse" / "vllm_sample_tail.log"
    assert ingest_paths(store, [tail]).ok
    from compilewatch.ingest.reingest import reingest
    assert reingest(store, all_files=True) == 1
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM piecewise_compiles").fetchone()[0] == len(expected(tail)["starts"])
