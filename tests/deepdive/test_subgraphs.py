"""Subgraphs read back, shown and diffed on tlparse's public samples (tests/fixtures/trace/tlparse):
`compilewatch show` groups vLLM's pieces by compile range and a compile id's artifacts by regional
subgraph, as tlparse 0.4.8 does; `compilewatch diff` pairs subgraphs by name. The candidate runs are
the same samples edited here, record by record, each edited payload's md5 written anew, so both
sides are logs the reader takes as clean."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.deepdive import subgraphs
from compilewatch.deepdive.diff import describe, diff_runs
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "tlparse"
_RECORD = re.compile(r"^(?P<prefix>[VIWEC]\d{4} [^\]]+\] )(?P<env>\{.*\})$")


def edit(src: Path, dst: Path, change) -> Path:
    """A copy of a trace with ``change(envelope, payload) -> (envelope, payload)`` applied to each
    record, has_payload recomputed as torch computes it (the md5 of the payload text)."""
    out, lines, i = [], src.read_text(encoding="utf-8").split("\n"), 0
    while i < len(lines):
        m = _RECORD.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        payload, j = [], i + 1
        while j < len(lines) and lines[j].startswith("\t"):
            payload.append(lines[j][1:])
            j += 1
        env, text = change(json.loads(m["env"]), "\n".join(payload))
        if "has_payload" in env:
            env["has_payload"] = hashlib.md5(text.encode()).hexdigest()
        out.append(m["prefix"] + json.dumps(env))
        out += ["\t" + ln for ln in text.split("\n")] if payload else []
        i = j
    dst.write_text("\n".join(out), encoding="utf-8")
    return dst


def _regional_edit(env, payload):
    if env.get("subgraph_name") == "repeated_subgraph0":
        env["frame_id"] = 3            # another compile id: the name, not the id, pairs it
        payload = payload + " edited"
    elif env.get("subgraph_name") == "partitioned_bw_subgraph_1_0":
        env["subgraph_name"] = "partitioned_bw_subgraph_2_0"
    return env, payload


def _piece_edit(env, payload):
    info = json.loads(payload) if (env.get("artifact") or {}).get("name") == "vllm_piecewise_compile_start" else None
    if info and info["piecewise_index"] == 1:
        info["compile_range_start"] = info["compile_range_end"] = 16
        payload = json.dumps(info)
    return env, payload


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("subgraphs")
    s = open_store(tmp / "cw.duckdb")
    runs = {}
    for name, change in (("subgraph_name.log", _regional_edit), ("vllm_sample_tail.log", _piece_edit),
                         ("vllm_post_grad_diff.log", None)):
        sides = [SAMPLES / name] + ([edit(SAMPLES / name, tmp / f"edited_{name}", change)] if change else [])
        for side, path in zip(("a", "b"), sides):
            report = ingest_paths(s, [path], run_id=f"{name}:{side}")
            assert report.ok and not report.files[0].errors, report.files[0].message
            runs[(name, side)] = f"{name}:{side}"
    return s, runs


def test_regional_subgraphs_pair_by_name_across_compile_ids(store):
    s, runs = store
    with s.read() as con:
        d = diff_runs(con, runs[("subgraph_name.log", "a")], runs[("subgraph_name.log", "b")])
    (pair,) = d.subgraphs
    assert pair.label == "repeated_subgraph0" and pair.baseline_ids == ["0/0"] and pair.candidate_ids == ["3/0"]
    assert pair.artifacts_changed == ["fx_graph_runnable"] and pair.changed
    assert [x.label for x in d.subgraphs_only_baseline] == ["partitioned_bw_subgraph_1_0"]
    assert [x.label for x in d.subgraphs_only_candidate] == ["partitioned_bw_subgraph_2_0"]
    text = describe(d)
    assert "[subgraph repeated_subgraph0]: changed" in text and "differs: fx_graph_runnable" in text


def test_vllm_pieces_pair_by_submodule_and_compile_range(store):
    s, runs = store
    with s.read() as con:
        d = diff_runs(con, runs[("vllm_sample_tail.log", "a")], runs[("vllm_sample_tail.log", "b")])
        same = diff_runs(con, runs[("vllm_sample_tail.log", "a")], runs[("vllm_sample_tail.log", "a")])
    (pair,) = d.subgraphs
    assert pair.key == ("piece", 0, "size 8", "submod_0") and not pair.changed
    assert [x.key for x in d.subgraphs_only_baseline] == [("piece", 0, "size 8", "submod_2")]
    assert [x.key for x in d.subgraphs_only_candidate] == [("piece", 0, "size 16", "submod_2")]
    assert [p.changed for p in same.subgraphs] == [False, False] and not same.subgraphs_only_candidate


def test_show_groups_pieces_by_compile_range_and_artifacts_by_subgraph(store):
    s, runs = store
    tail = runs[("vllm_sample_tail.log", "b")]
    with s.read() as con:
        groups = subgraphs.by_range(subgraphs.collect(con, tail))
    assert [(rng, [sg.info["submod_name"] for sg in items]) for rng, items in groups] == [
        ("size 8", ["submod_0"]), ("size 16", ["submod_2"])]
    cli = [sys.executable, "-m", "compilewatch", "show", "--db", str(s.db_path)]
    shown = subprocess.run(cli + [tail], capture_output=True, text=True, check=True).stdout
    assert "  size 8: 1 piece(s)\n    submod_0 (piece 0" in shown and "  size 16: 1 piece(s)\n    submod_2 (piece 1" in shown
    shown = subprocess.run(cli + [runs[("subgraph_name.log", "a")], "0/0"], capture_output=True, text=True,
                           check=True).stdout
    assert re.search(r"dynamo_output_graph.*\n  subgraph repeated_subgraph0:\n +3  fx_graph_runnable.*\n"
                     r"  subgraph partitioned_bw_subgraph_1_0:\n +5  fx_graph_runnable", shown), shown
    passes = subprocess.run(cli + [runs[("vllm_post_grad_diff.log", "a")]], capture_output=True, text=True,
                            check=True).stdout
    assert re.search(r"\n +1  0/0 +FusionPass patterns\n +13  0/0 +#0 FusionPass\n +17  0/0 +#1 ReshapePass", passes)


def test_diff_command_prints_subgraph_pairs_as_json(store):
    s, runs = store
    done = subprocess.run([sys.executable, "-m", "compilewatch", "diff", "--db", str(s.db_path), "--json",
                           runs[("subgraph_name.log", "a")], runs[("subgraph_name.log", "b")]],
                          capture_output=True, text=True, check=True)
    d = json.loads(done.stdout)
    assert [(p["subgraph"], p["artifacts_changed"]) for p in d["subgraphs"]] == [("repeated_subgraph0", ["fx_graph_runnable"])]


def test_show_prints_a_logged_subgraph_name_safely(tmp_path):
    """A subgraph's name is the log's text: an escape code in it is shown, never sent to the terminal."""
    def hostile(env, payload):
        if env.get("subgraph_name") == "repeated_subgraph0":
            env["subgraph_name"] = "repeated\x1b[2J\x1b]0;owned\x07"
        return env, payload
    log = edit(SAMPLES / "subgraph_name.log", tmp_path / "hostile.log", hostile)
    db = tmp_path / "cw.duckdb"
    assert ingest_paths(open_store(db), [log], run_id="hostile").ok
    for extra in ([], ["0/0"]):
        out = subprocess.run([sys.executable, "-m", "compilewatch", "show", "--db", str(db), "hostile", *extra],
                             capture_output=True, text=True, check=True).stdout
        assert "\x1b" not in out and "\x07" not in out
        assert "repeated\\x1b[2J" in out


def test_a_page_render_reads_a_runs_subgraphs_once(store):
    """The run detail's pieces and regional tables both list the run's subgraphs: inside one render
    (reads_held) they are read once, and the tables are the same as when each reads them itself."""
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import run_detail

    s, runs = store
    tail, regional = runs[("vllm_sample_tail.log", "b")], runs[("subgraph_name.log", "a")]
    with s.read() as con:
        apart = [(run_detail.pieces(con, Filters(run_id=r)), run_detail.regional_subgraphs(con, Filters(run_id=r)))
                 for r in (tail, regional)]
        assert subgraphs.collect(con, tail) is not subgraphs.collect(con, tail)
    with s.reads_held():
        with s.read() as con:
            assert subgraphs.collect(con, tail) is subgraphs.collect(con, tail)
            held = [(run_detail.pieces(con, Filters(run_id=r)), run_detail.regional_subgraphs(con, Filters(run_id=r)))
                    for r in (tail, regional)]
    assert len(apart[0][0]) == 2 and len(apart[1][1]) == 2
    for (p1, g1), (p2, g2) in zip(apart, held):
        assert p1.equals(p2) and g1.equals(g2)
