"""`compilewatch diff` on real CPU runs made with `compilewatch collect` (sample_logs/cpu-torch2.13-versions,
script sample_logs/scripts/cudagraphs/tiny_job_v{1,2}.py): v2 adds one op (`h = h.relu()`) and one
guard (`if self.act_mode == 1:` on an int module attribute). The diff names exactly those, the
kernel Inductor added for the relu, and nothing between two runs of the same version."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.deepdive.diff import diff_runs, normalise, text_diff
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
VERSIONS = REPO / "sample_logs" / "cpu-torch2.13-versions"


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    db = tmp_path_factory.mktemp("diff") / "cw.duckdb"
    assert ingest_paths(open_store(db), sorted(VERSIONS.glob("tiny-job_*.tar.gz"))).ok
    with open_store(db).read() as con:
        runs = {}
        for rid, label in con.execute("SELECT run_id, label FROM runs ORDER BY started_at").fetchall():
            runs.setdefault(label, []).append(rid)
    return db, runs


def test_the_added_op_guard_and_kernel(versions):
    db, runs = versions
    with open_store(db).read() as con:
        d = diff_runs(con, runs["v1"][0], runs["v2"][0])
        assert not d.only_baseline and not d.only_candidate
        (p,) = d.pairs
        assert p.frame[0] == "forward" and (p.baseline_id, p.candidate_id) == ("0/0", "0/0")
        assert p.ops_added == {".relu": 1} and p.ops_removed == {}
        assert p.guards_added == ["EQUALS_MATCH: L['self'].act_mode == 1"] and p.guards_removed == []
        assert p.kernels_added.get("cpp_fused_relu_N") == 1
        assert p.kernel_count[1] > p.kernel_count[0]
        assert "dynamo_output_graph" in p.graphs_changed and "inductor_output_code" in p.graphs_changed
        graph = text_diff(con, runs["v1"][0], runs["v2"][0], "0/0", "0/0", "dynamo_output_graph")
        added = [ln for ln in graph.splitlines() if ln.startswith("+ ") or ln.startswith("+\t") or ln.startswith("+    ")]
        assert any("= h.relu()" in ln for ln in added), graph


def test_two_runs_of_one_version_differ_in_nothing(versions):
    db, runs = versions
    with open_store(db).read() as con:
        for label in ("v1", "v2"):
            d = diff_runs(con, *runs[label][:2])
            assert [p.changed for p in d.pairs] == [False], label
            assert text_diff(con, *runs[label][:2], "0/0", "0/0", "inductor_output_code") == ""


def test_normalise_makes_run_specific_names_alike():
    a = "buf0 = empty_strided_cpu((64, 64), (64, 1), torch.float32)  # 0x7f3a2b  cpp_fused_relu_0 h_1"
    b = "buf0 = empty_strided_cpu((64, 64), (64, 1), torch.float32)  # 0x7f99ff  cpp_fused_relu_3 h_2"
    assert normalise(a) == normalise(b)


def test_the_cli_takes_specs_and_prints_json(versions):
    db, runs = versions
    r = subprocess.run([sys.executable, "-m", "compilewatch", "diff", "label=v1", "label=v2", "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["baseline_run"] == runs["v1"][-1] and out["candidate_run"] == runs["v2"][-1]   # the newest of each
    assert out["pairs"][0]["guards_added"] == ["EQUALS_MATCH: L['self'].act_mode == 1"]
    text = subprocess.run([sys.executable, "-m", "compilewatch", "diff", runs["v1"][0][:8], runs["v2"][0][:8],
                           "--db", str(db), "--show", "dynamo_output_graph"], capture_output=True, text=True, timeout=300)
    assert text.returncode == 0 and "+ op .relu" in text.stdout and "= h.relu()" in text.stdout, text.stdout
    bad = subprocess.run([sys.executable, "-m", "compilewatch", "diff", "label=v1", "label=nope", "--db", str(db)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "label=nope selects no run" in bad.stderr


def test_each_regression_says_how_to_see_what_changed(versions):
    """The report and the Overview give, with each regression, the diff command of its runs."""
    from compilewatch.review import report, wording
    from compilewatch.review.baseline import parse_spec
    from compilewatch.review.gate import assemble
    from compilewatch.review.rules import Rules
    db, runs = versions
    # v2 waits 5% longer for its compiles than v1 (9.18 s -> 9.64 s: forward + backward, both cold);
    # a tighter compile-time rule than the default flags it
    rules = Rules.from_settings().replace(compile_time_max_ratio=1.03, noise_sigmas=0.5)
    with open_store(db).read() as con:
        r = assemble(con, parse_spec("label=v1"), parse_spec("label=v2"), rules=rules)
    assert r.regressions
    md = report.to_markdown(r)
    for v in r.regressions:
        cmd = wording.diff_command(v)
        assert cmd and cmd.split()[2] in runs["v1"] and cmd.split()[3] in runs["v2"]
        assert f"see what changed: `{cmd}`" in md
