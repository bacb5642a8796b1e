"""`compilewatch collect` end to end on the CPU: a real (tiny) torch.compile job, read back through ingest.

The job (JOB below) compiles one function with inductor; a `print` in it makes a graph break and a
second input size with dynamic=False makes a recompile. Everything else (exit status, crash,
SIGTERM, Ctrl-C, timeout, errors) uses jobs that compile with backend="eager" or import no torch,
so the whole file stays cheap on a shared 2-core CPU.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from compilewatch.ingest.bundle import extract_archive, read_manifest
from compilewatch.ingest.records import CollectingSink

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
# One thread: OpenMP spin-waiting on a shared 2-core box makes CPU timings meaningless. No host
# probe: two more torch imports per bundle, and tests/collectors/test_host_evidence.py covers it.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "COMPILEWATCH_HOST_PROBE": "0"}

JOB = """
import torch

@torch.compile(dynamic=False)
def scaled_gelu(x):
    y = torch.nn.functional.gelu(x) * 2
    print("between graphs")          # graph break
    return y.sum(dim=-1)

for n in (8, 8, 8, 16, 16):          # a new size: recompile
    scaled_gelu(torch.randn(4, n))
print("job done")
"""

EAGER_JOB = """
import sys, time, torch
f = torch.compile(lambda x: x.cos() + 1, backend="eager")
f(torch.randn(3))
f(torch.randn(3))
print("ready", flush=True)
MODE = sys.argv[1]
if MODE == "crash":
    raise RuntimeError("boom after compiling")
time.sleep(120)
"""


def _cli(args, **kw):
    return subprocess.run([PY, "-m", "compilewatch", *args], env=ENV, cwd=REPO, capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


def _only_bundle(out: Path) -> Path:
    bundles = [p for p in out.iterdir() if p.is_dir()]
    assert len(bundles) == 1, bundles
    return bundles[0]


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("collect")
    script = root / "job.py"
    script.write_text(JOB)
    proc = _cli(["collect", "--model", "tiny-gelu", "--label", "ci", "--out", str(root / "out"), "--", PY, str(script)])
    return proc, _only_bundle(root / "out")


@pytest.mark.slow
def test_manifest_records_the_run(compiled_run):
    proc, bundle = compiled_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = read_manifest(bundle)
    assert m.model == "tiny-gelu" and m.label == "ci"
    assert m.command[-1].endswith("job.py")
    assert m.exit_status == 0 and m.end_reason == "exited"
    assert m.started_at.endswith("Z") and m.ended_at >= m.started_at and m.wall_time_s > 0
    assert m.torch_version.startswith("2.") and m.python_version.count(".") == 2
    assert m.host and m.cwd and m.collector.startswith("compilewatch collect")
    # the default: every component a TORCH_LOGS parser reads, plus perf_hints
    assert m.extra["torch_logs_setting"] == "graph_breaks,recompiles,cudagraphs,perf_hints"
    assert set(m.files) >= {"torch_logs", "torch_trace", "timings"}
    assert all((bundle / p).is_file() for p in m.files["torch_trace"])


@pytest.mark.slow
def test_child_output_is_teed_and_captured(compiled_run):
    proc, bundle = compiled_run
    assert "job done" in proc.stdout                  # still on the terminal
    log = (bundle / "torch_logs.txt").read_text()
    assert "job done" in log and "between graphs" in log
    assert "Graph break" in log and "Recompiling function" in log   # TORCH_LOGS reached the child


@pytest.mark.slow
def test_trace_and_text_parse_to_graph_breaks_and_recompiles(compiled_run):
    _, bundle = compiled_run
    from compilewatch.ingest.text import parse_text
    from compilewatch.ingest.trace import parse_trace

    m = read_manifest(bundle)
    trace = CollectingSink()
    for rel in m.files["torch_trace"]:
        with open(bundle / rel, "rb") as f:
            parse_trace(f, trace)
    assert trace.errors == []
    assert len(trace.rows["graph_breaks"]) >= 1
    assert len(trace.rows["recompiles"]) >= 1
    assert trace.metadata.get("torch_version", m.torch_version).startswith("2.")

    text = CollectingSink()
    with open(bundle / "torch_logs.txt", "rb") as f:
        parse_text(f, text)
    assert len(text.rows["graph_breaks"]) >= 1 and len(text.rows["recompiles"]) >= 1


@pytest.mark.slow
def test_summarize_json_counts_the_bundle(compiled_run, capsys):
    _, bundle = compiled_run
    from compilewatch.cli import main

    assert main(["summarize", str(bundle), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["graph_breaks"] >= 1 and s["recompiles"] >= 1
    assert s["torch_version"].startswith("2.") and s["errors"] == 0


@pytest.mark.slow
def test_timings_time_the_compiled_function(compiled_run):
    _, bundle = compiled_run
    t = json.loads((bundle / "timings.json").read_text())
    (fn,) = [c for c in t["callables"] if c["name"] == "scaled_gelu"]
    assert fn["mode"] == "compiled" and fn["calls"] == 5
    assert fn["first_call_ms"] > 0 and fn["steps"][0]["phase"] == "compile"
    assert [s["phase"] for s in fn["steps"]].count("compile") == 2    # first call + the recompile
    assert fn["recompiles"] == 1 and fn["graph_breaks"] >= 1 and fn["graphs"] >= 2
    assert t["dynamo_counters"]["stats"]["unique_graphs"] >= 2
    assert t["compile_phases_s"] and t["device"] == "cpu"

    from compilewatch.ingest.timings import parse_timings
    sink = CollectingSink()
    with open(bundle / "timings.json", "rb") as f:
        parse_timings(f, sink)
    modes = [r["mode"] for r in sink.rows["step_timings"]]
    assert modes.count("compiled") == 5 and not sink.errors
    # no optimizer: the iteration period is the gap between the 5 calls, the recompile's labelled
    it = [r for r in sink.rows["step_timings"] if r["mode"] == "iteration"]
    assert [r["phase"] for r in it] == ["compile", "warmup", "warmup", "compile"]
    manifest = read_manifest(bundle)
    assert manifest.extra["world_size"] == 1 and manifest.extra["cpu_model"]


# -- how a run ends -------------------------------------------------------------------------------
def test_exit_status_is_passed_on(tmp_path):
    proc = _cli(["collect", "--out", str(tmp_path), "--", PY, "-c", "import sys; print('hi'); sys.exit(3)"])
    assert proc.returncode == 3
    m = read_manifest(_only_bundle(tmp_path))
    assert m.exit_status == 3 and m.end_reason == "crashed"


@pytest.mark.slow
def test_crash_after_compile_keeps_logs_and_timings(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(EAGER_JOB)
    proc = _cli(["collect", "--out", str(tmp_path / "out"), "--", PY, str(script), "crash"])
    assert proc.returncode == 1
    bundle = _only_bundle(tmp_path / "out")
    m = read_manifest(bundle)
    assert m.end_reason == "crashed" and m.exit_status == 1
    assert "RuntimeError: boom after compiling" in (bundle / "torch_logs.txt").read_text()
    t = json.loads((bundle / "timings.json").read_text())
    assert t["callables"][0]["calls"] == 2 and t["callables"][0]["first_call_ms"] > 0


def _ignore_sigint():
    # What a non-interactive shell does to a command started with `&` (a SLURM batch script's
    # `srun ... &`): SIGINT ignored, and inherited so by everything it starts.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_and_wait_ready(args, ready=b"ready", sigint_ignored=False):
    proc = subprocess.Popen([PY, "-m", "compilewatch", *args], env=ENV, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            preexec_fn=_ignore_sigint if sigint_ignored else None)
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        if ready in line or time.monotonic() > deadline:
            break
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("sig, sigint_ignored", [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGUSR1, True)],
                         ids=["SIGTERM-interactive", "SIGTERM-batch-script", "SIGUSR1-no-handler"])
def test_scheduler_signal_is_passed_on_and_bundle_written(tmp_path, sig, sigint_ignored):
    # SIGTERM stops the run; a SLURM warning (USR1) to a job with no handler of its own ends it too
    script = tmp_path / "job.py"
    script.write_text(EAGER_JOB)
    proc = _start_and_wait_ready(["collect", "--out", str(tmp_path / "out"), "--", PY, str(script), "sleep"],
                                 sigint_ignored=sigint_ignored)
    proc.send_signal(sig)
    proc.stdout.read()
    assert proc.wait(timeout=60) == 128 + sig
    bundle = _only_bundle(tmp_path / "out")
    m = read_manifest(bundle)
    assert m.end_reason == "terminated" and m.exit_status == 128 + sig
    assert m.extra["signals_passed_on"] == [sig.name]
    # the hooks' handler wrote the timings before the signal's default action ended the child
    t = json.loads((bundle / "timings.json").read_text())
    assert t["callables"][0]["calls"] == 2


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["interactive", "batch-script"])
def test_ctrl_c_is_passed_on_and_bundle_written(tmp_path, sigint_ignored):
    # The command starts with SIGINT at its default even when the collector was started with it
    # ignored; without that, the Ctrl-C passed on did nothing and the run ended in SIGKILL (137).
    code = "import time; print('ready', flush=True); time.sleep(120)"
    proc = _start_and_wait_ready(["collect", "--out", str(tmp_path), "--", PY, "-c", code],
                                 sigint_ignored=sigint_ignored)
    proc.send_signal(signal.SIGINT)
    proc.stdout.read()
    assert proc.wait(timeout=60) == 128 + signal.SIGINT
    m = read_manifest(_only_bundle(tmp_path))
    assert m.end_reason == "interrupted" and m.exit_status == 130
    assert m.extra["signals_passed_on"] == ["SIGINT"]


def test_command_starts_with_sigint_and_sigterm_at_their_defaults(tmp_path):
    code = ("import signal\n"
            "print([signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM)])")
    proc = subprocess.run([PY, "-m", "compilewatch", "collect", "--no-hooks", "--out", str(tmp_path), "--",
                           PY, "-c", code], env=ENV, cwd=REPO, capture_output=True, text=True, timeout=120,
                          preexec_fn=_ignore_sigint)
    assert proc.returncode == 0, proc.stderr
    assert "[False, False]" in proc.stdout


SLURM_JOB = """
import signal, sys, time
def warned(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
    if signum == signal.SIGUSR2:     # checkpoint written: leave before the time limit
        sys.exit(0)
signal.signal(signal.SIGUSR1, warned)
signal.signal(signal.SIGUSR2, warned)
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["interactive", "batch-script"])
def test_slurm_warning_signals_are_passed_on_and_the_run_goes_on(tmp_path, sigint_ignored):
    script = tmp_path / "job.py"
    script.write_text(SLURM_JOB)
    proc = _start_and_wait_ready(["collect", "--no-hooks", "--out", str(tmp_path / "out"), "--", PY, str(script)],
                                 sigint_ignored=sigint_ignored)
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline().strip() == b"got SIGUSR1"     # passed on; the job went on
    proc.send_signal(signal.SIGUSR2)
    proc.stdout.read()
    assert proc.wait(timeout=60) == 0
    bundle = _only_bundle(tmp_path / "out")
    m = read_manifest(bundle)
    assert m.end_reason == "exited" and m.extra["signals_passed_on"] == ["SIGUSR1", "SIGUSR2"]
    log = (bundle / "torch_logs.txt").read_text()
    assert "got SIGUSR1" in log and "got SIGUSR2" in log


def test_timeout_stops_the_command_and_says_so(tmp_path):
    t0 = time.monotonic()
    proc = _cli(["collect", "--timeout", "1", "--out", str(tmp_path), "--", PY, "-c", "import time; time.sleep(120)"])
    assert time.monotonic() - t0 < 60
    assert proc.returncode == 128 + signal.SIGTERM
    m = read_manifest(_only_bundle(tmp_path))
    assert m.end_reason == "timeout" and m.extra["timeout_s"] == 1


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path):
    from compilewatch.collectors.collect import collect

    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    res = collect([PY, "-c", code], tmp_path, timeout=0.5, grace_s=0.5, tee=False, hooks=False, probe=False)
    assert res.end_reason == "timeout" and res.exit_status == 128 + signal.SIGKILL
    assert (res.bundle / "manifest.json").is_file()


# -- errors are one line with a hint ----------------------------------------------------------------
def _one_line_error(proc):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("compilewatch: error:") and "hint:" in lines[0]
    return lines[0]


def test_unwritable_output_folder_is_one_line_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = _cli(["collect", "--out", str(blocker / "sub"), "--", PY, "-c", "pass"])
    assert proc.returncode == 2
    assert "cannot write the bundle" in _one_line_error(proc)


def test_unknown_model_is_one_line_error(tmp_path):
    proc = _cli(["bench", "--models", "resnet9000", "--out", str(tmp_path)])
    assert proc.returncode == 2
    assert "unknown model 'resnet9000'" in _one_line_error(proc)


def test_missing_command_is_one_line_error(tmp_path):
    proc = _cli(["collect", "--out", str(tmp_path), "--", "no-such-command-xyz"])
    assert proc.returncode == 2
    assert "command not found" in _one_line_error(proc)


def test_python_without_torch_is_one_line_error(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    bare_py = bare / "bin" / "python"
    proc = subprocess.run([PY, "-m", "compilewatch", "collect", "--out", str(tmp_path / "out"), "--", str(bare_py), "-c", "pass"],
                          env={**ENV, "PYTHONNOUSERSITE": "1"}, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "torch is not installed" in _one_line_error(proc)


# -- packaging -------------------------------------------------------------------------------------
def test_help_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"   # any `import torch` now fails
            "from compilewatch.cli import main\n"
            "try:\n    main(['collect', '--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "try:\n    main(['bench', '--list-models'])\nexcept SystemExit:\n    pass\n")
    proc = subprocess.run([PY, "-c", code], env=ENV, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--timeout" in proc.stdout and "resnet50" in proc.stdout


def test_archive_is_a_readable_bundle(tmp_path):
    proc = _cli(["collect", "--archive", "--model", "m", "--out", str(tmp_path), "--", PY, "-c", "print('x')"])
    assert proc.returncode == 0
    (archive,) = tmp_path.glob("*.tar.gz")
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    root = extract_archive(archive, tmp_path / "x")
    assert read_manifest(root).model == "m"
    with tarfile.open(archive) as tf:
        assert any(n.endswith("torch_logs.txt") for n in tf.getnames())


def test_existing_sitecustomize_still_runs(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    marker = tmp_path / "marker"
    (theirs / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    from compilewatch.collectors.collect import collect

    # theirs is on the path behind ours: ours runs (the child sees it as sitecustomize), then chains
    res = collect([PY, "-c", "import sys; assert 'compilewatch' in sys.modules['sitecustomize'].__doc__"], tmp_path / "out2",
                  pythonpath=[str(theirs)], tee=False, probe=False)
    assert res.exit_status == 0 and marker.read_text() == "ran"
