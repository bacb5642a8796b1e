"""What the collector records about the host beside the logs: the settings a process ran under
(collectors/job_settings.py, read by the timing hooks) and the host probe before and after a job
(collectors/host_probe.py, run by `compilewatch collect`). The end-to-end case, two real runs whose
only difference is a setting, read back through ingest and the review, is tests/review/test_evidence.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilewatch.collectors import host_probe, job_settings
from compilewatch.ingest.bundle import SETTING_SOURCES, read_manifest
from compilewatch.ingest.records import CollectingSink

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def test_the_collector_and_ingest_name_the_same_sources():
    declared = {job_settings.TORCH, job_settings.DYNAMO, job_settings.INDUCTOR, job_settings.FUNCTORCH,
                job_settings.ENV}
    assert declared == set(SETTING_SOURCES)


def test_only_allow_listed_environment_variables_are_read():
    environ = {
        "OMP_NUM_THREADS": "4", "NCCL_ALGO": "Ring", "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
        "KMP_AFFINITY": "granularity=fine", "CUDA_VISIBLE_DEVICES": "0,1,3",
        "TORCHINDUCTOR_CACHE_DIR": "/home/someone/cache",           # a location: only that it is set
        "NCCL_IB_AUTH_KEY": "hunter2", "TORCH_COMPILE_TOKEN": "t0ps3cret",   # read like credentials
        "TORCH_LOGS": "+dynamo", "TORCH_TRACE": "/tmp/x",          # the collector's own
        "AWS_SECRET_ACCESS_KEY": "abc", "HF_TOKEN": "hf_x", "PATH": "/usr/bin", "HOME": "/root",
    }
    got = job_settings.env_settings(environ)
    assert got == {"CUDA_VISIBLE_DEVICES (count)": "3", "KMP_AFFINITY": "granularity=fine", "NCCL_ALGO": "Ring",
                   "OMP_NUM_THREADS": "4", "TORCHINDUCTOR_CACHE_DIR": "(set)", "TORCHINDUCTOR_MAX_AUTOTUNE": "1"}
    assert not {"hunter2", "t0ps3cret", "abc", "hf_x"} & set(got.values())


def test_a_value_reads_the_same_in_every_process():
    text = job_settings._text
    assert text({"b", "a", "c"}) == "{a, b, c}"                       # not the set's hash order
    assert text({"y": 1, "x": {2, 1}}) == "{x: {1, 2}, y: 1}"
    assert "0x" not in text(object()) and text(len) == "builtins.len"
    assert len(text("z" * 1000)) == job_settings.MAX_VALUE_CHARS


def test_config_entries_are_listed_only_while_off_their_default():
    import torch
    import torch._inductor.config as inductor_config

    before = job_settings.job_settings(torch)
    assert "torch._inductor.config.max_autotune" not in before
    with inductor_config.patch(max_autotune=True):
        during = job_settings.job_settings(torch)
        assert during["torch._inductor.config.max_autotune"] == {"value": "True", "source": "inductor_config"}
    # the patch ended: torch counts the entry as set, but it is back at its default
    after = job_settings.job_settings(torch)
    assert "torch._inductor.config.max_autotune" not in after
    assert after["torch.get_num_threads()"] == {"value": str(torch.get_num_threads()), "source": "torch"}


def test_ingest_keeps_good_settings_and_counts_bad_ones():
    from io import BytesIO

    from compilewatch.ingest.timings import parse_timings

    doc = {"callables": [], "rank": 1, "settings": {
        "torch.get_num_threads()": {"value": "8", "source": "torch"},
        "OMP_NUM_THREADS": {"value": "8", "source": "env"},
        "bad-source": {"value": "1", "source": "somewhere"},
        "not-text": {"value": 8, "source": "torch"},
        "not-an-object": "8"}}
    sink = CollectingSink()
    parse_timings(BytesIO(json.dumps(doc).encode()), sink)
    assert sink.rows["run_settings"] == [
        {"rank": 1, "name": "torch.get_num_threads()", "value": "8", "source": "torch"},
        {"rank": 1, "name": "OMP_NUM_THREADS", "value": "8", "source": "env"}]
    assert len(sink.errors) == 3 and all(e["kind"] == "payload" for e in sink.errors)
    sink = CollectingSink()
    parse_timings(BytesIO(json.dumps({"callables": [], "settings": ["x"]}).encode()), sink)
    assert "run_settings" not in sink.rows and len(sink.errors) == 1


def test_ingest_reads_the_manifests_probe_and_counts_a_bad_one():
    from io import BytesIO

    from compilewatch.ingest.manifest import parse_manifest

    ok = {"median_ms": 21.5, "iqr_ms": 0.5, "min_ms": 21.0, "samples_ms": [21.0, 21.5, 22.0], "device": "cpu",
          "threads": 2, "process_s": 1.9, "load_avg": 0.7}
    doc = {"run_id": "r", "host_probe": {"device": "cpu", "before": ok, "after": {"error": "the probe ran past 120 s"}}}
    sink = CollectingSink()
    parse_manifest(BytesIO(json.dumps(doc).encode()), sink)
    before, after = sink.rows["host_probes"]
    assert (before["phase"], before["median_ms"], before["samples"], before["threads"]) == ("before", 21.5, 3, 2)
    assert (after["phase"], after["median_ms"], after["error"]) == ("after", None, "the probe ran past 120 s")
    assert sink.errors == []
    for bad in ({"before": "fast"}, "yes", {"before": {"median_ms": "NaN"}}):
        sink = CollectingSink()
        parse_manifest(BytesIO(json.dumps({"run_id": "r", "host_probe": bad}).encode()), sink)
        assert "host_probes" not in sink.rows and len(sink.errors) == 1, bad
    sink = CollectingSink()
    parse_manifest(BytesIO(json.dumps({"run_id": "r"}).encode()), sink)      # older manifests: nothing
    assert not sink.rows and not sink.errors


def test_a_probe_that_cannot_run_says_why(tmp_path):
    missing = host_probe.run_probe(str(tmp_path / "no-python"), dict(os.environ))
    assert "could not start" in missing["error"] and "median_ms" not in missing
    bare = tmp_path / "bare"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    no_torch = host_probe.run_probe(str(bare / "bin" / "python"), {**os.environ, "PYTHONNOUSERSITE": "1"})
    assert "No module named 'torch'" in no_torch["error"] and no_torch["process_s"] > 0


def test_the_probe_leaves_the_collectors_variables_out():
    inject = str(REPO / "collectors" / "_inject")
    job = {"TORCH_LOGS": "graph_breaks", "TORCH_TRACE": "/b/trace", "COMPILEWATCH_TIMINGS": "/b/timings.json",
           "COMPILEWATCH_BUNDLE": "/b", "OMP_NUM_THREADS": "3", "PYTHONPATH": os.pathsep.join([inject, "/theirs"])}
    assert host_probe.probe_env(job, inject) == {"OMP_NUM_THREADS": "3", "PYTHONPATH": "/theirs"}


def _collect(tmp_path, *options, env=ENV):
    return subprocess.run([PY, "-m", "compilewatch", "collect", "--out", str(tmp_path), *options, "--",
                           PY, "-c", "print('hi')"], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def _bundle(out: Path) -> Path:
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    return bundle


def test_no_probe_and_its_setting_leave_the_probe_out(tmp_path):
    assert _collect(tmp_path / "a", "--no-probe").returncode == 0
    assert "host_probe" not in read_manifest(_bundle(tmp_path / "a")).extra
    assert _collect(tmp_path / "b", env={**ENV, "COMPILEWATCH_HOST_PROBE": "0"}).returncode == 0
    assert "host_probe" not in read_manifest(_bundle(tmp_path / "b")).extra


@pytest.mark.slow
def test_a_collector_asked_to_stop_skips_the_second_probe(tmp_path):
    code = "import time; print('ready', flush=True); time.sleep(120)"
    proc = subprocess.Popen([PY, "-m", "compilewatch", "collect", "--out", str(tmp_path), "--", PY, "-c", code],
                            env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    for line in proc.stdout:          # the first probe runs before the command prints
        if b"ready" in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    proc.stdout.read()
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    probe = read_manifest(_bundle(tmp_path)).extra["host_probe"]
    assert probe["before"]["median_ms"] > 0 and probe["device"] == "cpu"
    assert probe["after"] == {"error": "not run: the collector was asked to stop"}


def test_settings_are_recorded_where_the_jobs_interpreter_lacks_compilewatch():
    """sitecustomize loads hooks.py from our tree when the child cannot import compilewatch; the hooks
    then load job_settings.py beside it the same way."""
    code = ("import sys, importlib.util\n"
            "sys.modules['compilewatch'] = None\n"      # any `import compilewatch...` now fails
            f"spec = importlib.util.spec_from_file_location('compilewatch.collectors.hooks', {str(REPO / 'collectors' / 'hooks.py')!r})\n"
            "hooks = importlib.util.module_from_spec(spec); sys.modules[spec.name] = hooks; spec.loader.exec_module(hooks)\n"
            "import json, torch\n"
            "torch.set_num_threads(1)\n"
            "print(json.dumps(hooks.RECORDER.snapshot()['settings']))\n")
    proc = subprocess.run([PY, "-c", code], env=ENV, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    settings = json.loads(proc.stdout.splitlines()[-1])
    assert settings["torch.get_num_threads()"] == {"value": "1", "source": "torch"}
    assert settings["OMP_NUM_THREADS"] == {"value": "1", "source": "env"}
