"""`compilewatch.collect(...)` in the running process, on the CPU: the bundle of a real torch.compile
job collected in process reads as the same job wrapped by `compilewatch collect`; a notebook's
cells each get their own bundle and leave torch as they found it; the decorator, an interrupt, a
scheduler's SIGTERM, the wrapper around it, and a Python without torch."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compilewatch.ingest.bundle import read_manifest
from compilewatch.ingest.formats import glog
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.records import CollectingSink
from compilewatch.store import open_store
from tests.collectors.test_collect import ENV, JOB, PY, REPO

IN_PROCESS_JOB = "import sys\nimport compilewatch\n" \
    "with compilewatch.collect(model='tiny-gelu', label='ci', out=sys.argv[1], inbox=sys.argv[2]) as c:\n" \
    + textwrap.indent(JOB, "    ") + "print('bundle', c.result.bundle)\n"


def _run(args, **kw):
    return subprocess.run(args, env=ENV, cwd=REPO, capture_output=True, text=True, timeout=kw.pop("timeout", 300), **kw)


def _stored(con, run_id):
    metrics = dict(con.execute("SELECT metric, value FROM run_metrics WHERE run_id = ? AND subject = '' AND metric IN "
                               "('graph_breaks', 'distinct_graph_breaks', 'recompiles', 'failures')", [run_id]).fetchall())
    return {
        "metrics": metrics,
        "compile_ids": con.execute("SELECT count(DISTINCT compile_id) FROM compiles WHERE run_id = ?", [run_id]).fetchone()[0],
        "steps": con.execute("SELECT callable, mode, phase, count(*) FROM step_timings WHERE run_id = ? "
                             "GROUP BY ALL ORDER BY ALL", [run_id]).fetchall(),
        "run": con.execute("SELECT model, label, end_reason, exit_status FROM runs WHERE run_id = ?", [run_id]).fetchone(),
    }


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    """The same job collected in process (its bundle sent to a store's inbox) and wrapped."""
    root = tmp_path_factory.mktemp("in-process")
    (root / "in_process.py").write_text(IN_PROCESS_JOB)
    (root / "plain.py").write_text(JOB)
    store_dir = root / "store"
    proc = _run([PY, str(root / "in_process.py"), str(root / "out"), str(store_dir / "inbox")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    wrapped = _run([PY, "-m", "compilewatch", "collect", "--model", "tiny-gelu", "--label", "ci",
                    "--out", str(root / "wrapped"), "--", PY, str(root / "plain.py")])
    assert wrapped.returncode == 0, wrapped.stderr[-3000:]
    (in_process,) = (root / "out").iterdir()
    (wrapped_bundle,) = (root / "wrapped").iterdir()
    return {"in_process": in_process, "wrapped": wrapped_bundle, "db": store_dir / "cw.duckdb", "stdout": proc.stdout}


@pytest.mark.slow
def test_the_in_process_bundle_reads_as_the_wrapped_run(both_runs):
    db = both_runs["db"]
    # the in-process bundle came through the store's inbox; the wrapped one is ingested directly
    inbox = _run([PY, "-m", "compilewatch", "inbox", "--db", str(db)])
    assert inbox.returncode == 0, inbox.stdout + inbox.stderr
    assert ingest_paths(open_store(db), [both_runs["wrapped"]]).ok
    with open_store(db).read() as con:
        ours = _stored(con, read_manifest(both_runs["in_process"]).run_id)
        theirs = _stored(con, read_manifest(both_runs["wrapped"]).run_id)
    assert ours == theirs
    assert ours["metrics"]["graph_breaks"] >= 1 and ours["metrics"]["recompiles"] >= 1
    assert ours["run"] == ("tiny-gelu", "ci", "exited", 0)
    # the compiled function timed as the wrapper's hooks time it: 5 calls, 2 of them compiling
    assert ("scaled_gelu", "compiled", "compile", 2) in ours["steps"]


@pytest.mark.slow
def test_the_text_log_is_torch_s_glog_format(both_runs):
    from compilewatch.ingest.text import parse_text

    bundle = both_runs["in_process"]
    m = read_manifest(bundle)
    assert m.collector.startswith("compilewatch.collect") and m.extra["in_process"] is True
    assert m.extra["torch_logs_setting"] == "graph_breaks,recompiles,perf_hints"
    lines = (bundle / "torch_logs.txt").read_text().splitlines()
    # torch's records only, every line with torch's glog prefix; not the program's prints
    assert lines and all(re.match(glog.RANK + glog.CORE, line) for line in lines)
    assert "between graphs" in both_runs["stdout"] and not [ln for ln in lines if ln.endswith("] between graphs")]
    sink = CollectingSink()
    with open(bundle / "torch_logs.txt", "rb") as f:
        parse_text(f, sink)
    assert sink.errors == []
    assert len(sink.rows["graph_breaks"]) >= 1 and len(sink.rows["recompiles"]) >= 1


NOTEBOOK = r'''
import json, logging, os, signal, sys
import torch
import compilewatch
from compilewatch.collectors import hooks
from torch._logging import _internal

OUT = sys.argv[1]


def state():
    loggers = {q: sorted(type(h).__name__ for h in logging.getLogger(q).handlers)
               for q in _internal.log_registry.get_log_qnames()}
    return {"compile": repr(torch.compile), "TORCH_LOGS": os.environ.get("TORCH_LOGS"), "loggers": loggers,
            "trace_handlers": len(_internal.trace_log.handlers), "recorder": id(hooks.RECORDER),
            "artifacts": sorted(_internal.log_state.artifact_names),
            "signals": [str(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)]}


def sizes():
    return {str(p): p.stat().st_size for p in sorted(__import__("pathlib").Path(OUT).rglob("*")) if p.is_file()}


seen = {"before": state()}
# cell 1
with compilewatch.collect(model="cell1", out=OUT) as c1:
    f = torch.compile(lambda x: x.cos() + 1, backend="eager")
    f(torch.randn(3))
seen["after cell 1"] = state()


# cell 2: a decorated function, called twice: a bundle per call
@compilewatch.collect(model="cell2", out=OUT)
def train(n):
    g = torch.compile(lambda x: x.sin() * n, backend="eager")
    g(torch.randn(4))


train(2)
train(3)
seen["after cell 2"] = state()
# cell 3: interrupted
try:
    with compilewatch.collect(model="cell3", out=OUT) as c3:
        raise KeyboardInterrupt
except KeyboardInterrupt:
    seen["reraised"] = True
seen["after cell 3"] = state()
written = sizes()
# compiling outside any collection writes into none of the bundles
h = torch.compile(lambda x: x.tan() - 1, backend="eager", dynamic=False)
for n in (2, 3):
    h(torch.randn(n))
seen["unchanged"] = sizes() == written
seen["c3"] = [c3.result.end_reason, c3.result.exit_status]
print(json.dumps(seen))
'''


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebook")
    (root / "nb.py").write_text(NOTEBOOK)
    proc = _run([PY, str(root / "nb.py"), str(root / "out")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), root / "out"


@pytest.mark.slow
def test_each_cell_puts_torch_back_as_it_was(notebook):
    seen, _ = notebook
    before = seen["before"]
    for cell in ("after cell 1", "after cell 2", "after cell 3"):
        assert seen[cell] == before, cell
    assert seen["unchanged"] and seen["reraised"]
    assert seen["c3"] == ["interrupted", 130]


@pytest.mark.slow
def test_each_cell_and_each_decorated_call_gets_its_own_bundle(notebook):
    _, out = notebook
    names = sorted(p.name.split("-")[0] for p in out.iterdir())
    assert names == ["cell1", "cell2", "cell2", "cell3"]
    for bundle in out.iterdir():
        assert read_manifest(bundle).files.get("timings") == "timings.json"


def _trace_strings(bundle: Path) -> tuple[set, set]:
    """(string ids the trace defines, string ids its stacks refer to)."""
    defined, used = set(), set()
    for path in (bundle / "trace").iterdir():
        for line in path.read_text().splitlines():
            if line.startswith("\t"):
                continue
            meta = json.loads(line.split("] ", 1)[1])
            if "str" in meta:
                defined.add(meta["str"][1])
            for frame in (meta.get("dynamo_start") or {}).get("stack", []):
                used.add(frame["filename"])
    return defined, used


@pytest.mark.slow
def test_a_later_cell_s_trace_defines_the_strings_interned_before_it(notebook):
    _, out = notebook
    later = sorted(p for p in out.iterdir() if p.name.startswith("cell2"))
    for bundle in later:
        defined, used = _trace_strings(bundle)
        assert used and used <= defined, (used, defined)
        sink = CollectingSink()
        from compilewatch.ingest.trace import parse_trace
        for path in (bundle / "trace").iterdir():
            with open(path, "rb") as f:
                parse_trace(f, sink)
        assert sink.errors == [] and sink.rows["compiles"]


def test_under_the_wrapper_the_wrapper_writes_the_one_bundle(tmp_path):
    code = ("import sys, torch, compilewatch\n"
            "with compilewatch.collect(model='inner', out=sys.argv[1]) as c:\n"
            "    torch.compile(lambda x: x + 1, backend='eager')(torch.randn(2))\n"
            "assert c.deferred and c.result is None\n")
    (tmp_path / "job.py").write_text(code)
    proc = _run([PY, "-m", "compilewatch", "collect", "--model", "outer", "--out", str(tmp_path / "wrapped"),
                 "--", PY, str(tmp_path / "job.py"), str(tmp_path / "inner")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "inner").exists()
    (bundle,) = (tmp_path / "wrapped").iterdir()
    assert read_manifest(bundle).model == "outer"


def test_a_scheduler_s_sigterm_ends_the_block_with_the_bundle_written(tmp_path):
    code = ("import sys, time, torch, compilewatch\n"
            "with compilewatch.collect(model='long', out=sys.argv[1]):\n"
            "    f = torch.compile(lambda x: x * 2, backend='eager')\n"
            "    f(torch.randn(2)); f(torch.randn(2))\n"
            "    print('ready', flush=True)\n"
            "    time.sleep(120)\n")
    (tmp_path / "job.py").write_text(code)
    proc = subprocess.Popen([PY, str(tmp_path / "job.py"), str(tmp_path / "out")], env=ENV, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout.readline().strip() == b"ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM      # the signal still ends the program
    (bundle,) = (tmp_path / "out").iterdir()
    m = read_manifest(bundle)
    assert (m.end_reason, m.exit_status) == ("terminated", 143)
    timings = json.loads((bundle / "timings.json").read_text())
    assert [c["calls"] for c in timings["callables"] if c["mode"] == "compiled"] == [2]


def test_importing_it_needs_neither_torch_nor_streamlit(tmp_path):
    code = ("import sys; sys.modules['torch'] = None; sys.modules['streamlit'] = None\n"
            "import compilewatch\n"
            "from compilewatch.core.errors import TorchMissingError\n"
            "c = compilewatch.collect(model='m', out=sys.argv[1])\n"
            "try:\n    c.__enter__()\nexcept TorchMissingError as e:\n    print('refused:', e)\n")
    proc = _run([PY, "-c", code, str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr
    assert "refused: torch is not installed" in proc.stdout
    assert not (tmp_path / "out").exists()


def test_a_torch_without_the_trace_handler_loses_the_trace_only(tmp_path):
    # as a torch whose logging internals moved would: that part is said and left out, the rest written
    code = ("import sys, torch, compilewatch\n"
            "from torch._logging import _internal\n"
            "del _internal.LazyTraceHandler\n"
            "with compilewatch.collect(model='m', out=sys.argv[1]) as c:\n"
            "    f = torch.compile(lambda x: x.cos(), backend='eager', dynamic=False)\n"
            "    f(torch.randn(2)); f(torch.randn(3))\n")
    proc = _run([PY, "-c", code, str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the structured trace not collected in this process: AttributeError" in proc.stderr
    (bundle,) = (tmp_path / "out").iterdir()
    m = read_manifest(bundle)
    assert "torch_trace" not in m.files and m.end_reason == "exited"
    assert "Recompiling function" in (bundle / "torch_logs.txt").read_text()
    assert [c["calls"] for c in json.loads((bundle / "timings.json").read_text())["callables"] if c["mode"] == "compiled"] == [2]
