"""Run detail's Subgraphs tab on tlparse's public samples (tests/fixtures/trace/tlparse through the
loader): vLLM's pieces by compile range, its post-grad passes in order, regional subgraphs by name,
each row what the sample's records say (read from the file with json)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pages import PAGES, _ok, _table

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "trace" / "tlparse"
WIDE = {"from": "2000-01-01", "to": "2100-01-01"}


def _envelopes(name: str) -> list[tuple[dict, str]]:
    lines = (SAMPLES / name).read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(lines):
        if line[:1] in "VIWEC" and "] {" in line:
            payload = []
            for more in lines[i + 1:]:
                if not more.startswith("\t"):
                    break
                payload.append(more[1:])
            out.append((json.loads(line.split("] ", 1)[1]), "\n".join(payload)))
    return out


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("subgraphs") / "cw.duckdb"
    for path in sorted(SAMPLES.glob("*.log")):
        assert ingest_paths(open_store(db), [path], run_id=path.stem).ok
    return db


def test_pieces_by_compile_range(app_at, samples_db):
    at = app_at(samples_db, PAGES["run_detail"], query={"run": "vllm_sample_tail", **WIDE})
    _ok(at)
    starts = [json.loads(p) for env, p in _envelopes("vllm_sample_tail.log")
              if env["artifact"]["name"] == "vllm_piecewise_compile_start"]
    pieces = _table(at, "compile_range", "piece")
    assert list(pieces["piece"]) == [s["submod_name"] for s in starts]
    assert list(pieces["index"]) == [s["piecewise_index"] for s in starts]
    assert set(pieces["compile_range"]) == {f"size {s['compile_range_start']}" for s in starts}
    assert list(pieces["cudagraph_size"]) == [s["is_cudagraph_capture_size"] for s in starts]


def test_post_grad_passes_in_order(app_at, samples_db):
    at = app_at(samples_db, PAGES["run_detail"], query={"run": "vllm_post_grad_diff", **WIDE})
    _ok(at)
    names = [env["graph_dump"]["name"] for env, _ in _envelopes("vllm_post_grad_diff.log") if "graph_dump" in env]
    passes = _table(at, "pass_name", "record")
    assert list(passes["pass_name"]) == [n.split(".")[-1] for n in names]
    assert list(passes["record"]) == ["graph after the pass" if n.startswith("vllm_post_grad.") else "patterns"
                                      for n in names]


def test_regional_subgraphs_by_name(app_at, samples_db):
    at = app_at(samples_db, PAGES["run_detail"], query={"run": "subgraph_name", **WIDE})
    _ok(at)
    named = [env["subgraph_name"] for env, _ in _envelopes("subgraph_name.log") if "subgraph_name" in env]
    regions = _table(at, "subgraph_name", "compile_ids")
    assert list(regions["subgraph_name"]) == named and set(regions["compile_ids"]) == {"0/0"}


def test_compare_two_runs_pairs_subgraphs_by_name(app_at, samples_db, tmp_path):
    """Compare → "What the compiler did differently" lists the regional subgraphs paired by name: the
    sample against a copy whose one subgraph's payload is edited here (its md5 written anew)."""
    import hashlib

    src = SAMPLES / "subgraph_name.log"
    (env, payload), = [(e, p) for e, p in _envelopes(src.name) if e.get("subgraph_name") == "repeated_subgraph0"]
    edited = payload + ", edited"
    copy = tmp_path / "subgraph_name_edited.log"
    copy.write_text(src.read_text(encoding="utf-8").replace(f"\t{payload}\n", f"\t{edited}\n").replace(
        env["has_payload"], hashlib.md5(edited.encode()).hexdigest()), encoding="utf-8")
    report = ingest_paths(open_store(samples_db), [copy], run_id="subgraph_name_edited", strict=True)
    assert report.ok and not report.files[0].errors
    at = app_at(samples_db, PAGES["compare"], query={"run": "subgraph_name", "run_b": "subgraph_name_edited", **WIDE})
    at.toggle(key="cmp_diff_open").set_value(True).run()
    _ok(at)
    rows = _table(at, "compiled_frame", "artifacts").set_index("compiled_frame")
    assert rows.at["subgraph repeated_subgraph0", "what"] == "subgraph changed"
    assert rows.at["subgraph repeated_subgraph0", "artifacts"] == "≠ fx_graph_runnable"
    assert rows.at["subgraph partitioned_bw_subgraph_1_0", "what"] == "same"
