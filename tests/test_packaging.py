"""A non-editable install works from any folder, beside a team's own top-level packages named like
our rooms (`app`, `review`, `ingest`, `collectors`): everything of ours lives under `compilewatch.`; the CLI starts, the migrations are packaged, a
real log is summarised and stored, and the dashboard's sample_logs lookup does not look inside
site-packages for a folder that is not installed (it finds none, and the dashboard then shows
how to add data)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"


@pytest.mark.slow
def test_an_installed_copy_runs_from_anywhere(tmp_path, c_compiler):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(REPO)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"pip could not build here: {r.stderr[-300:]}")
    assert (target / "compilewatch" / "store" / "migrations" / "001_initial.sql").exists()
    assert sorted(p.name for p in target.iterdir() if p.suffix != ".dist-info" and p.name != "bin") == ["compilewatch"]
    assert not (target / "sample_logs").exists()
    if c_compiler:   # the text reader's compiled loop (setup.py), built and packaged
        assert list((target / "compilewatch" / "ingest" / "text").glob("_skim*.so")), r.stderr[-2000:]
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    # The team's own code, first on the path: packages that share our rooms' names and would break
    # anything of ours that imported them.
    team = tmp_path / "team"
    for name in ("app", "review", "ingest", "collectors", "store", "core"):
        (team / name).mkdir(parents=True)
        (team / name / "__init__.py").write_text(f"raise ImportError('the team\'s own {name}, not compilewatch')\n")
    env = {**os.environ, "PYTHONPATH": f"{team}{os.pathsep}{target}", "COMPILEWATCH_DB": str(elsewhere / "db" / "x.duckdb")}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=elsewhere, env=env, capture_output=True, text=True,
                              timeout=300)
    r = run("-m", "compilewatch", "summarize", str(TRACE), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["graph_breaks"] > 0
    r = run("-m", "compilewatch", "ingest", str(TRACE), "--quiet")
    assert r.returncode == 0 and "1 stored" in r.stdout, r.stdout + r.stderr
    r = run("-c", "import compilewatch.ingest as i, compilewatch.app.dashboard_settings as s, "
                  "compilewatch.app.bootstrap as b; "
                  "assert i.__file__.startswith(%r), i.__file__; "
                  "print(b._sample_paths(s.sample_logs_dir()))" % str(target))
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
