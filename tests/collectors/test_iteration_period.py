"""The collector records the iteration period of a real training job it wraps, with no change to
the job: the time between optimizer.step() calls, host work between steps included, warm-up apart
from steady steps, and ingest stores it per rank."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.store import open_store  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}

# A team's loop as they write it: nothing here knows about compilewatch. Steps 0-9 sleep 10 ms of
# host work between steps, steps 10-19 sleep 40 ms: only the iteration period can see that.
JOB = """
import time, torch
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)), backend="eager")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for i in range(20):
    time.sleep(0.01 if i < 10 else 0.04)      # "data loading"
    loss = model(torch.randn(8, 16)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.mark.slow
def test_collect_records_the_iteration_period(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(JOB)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "compilewatch", "collect", "--model", "tiny-mlp", "--out", str(out),
                           "--", sys.executable, str(script)], env=ENV, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    t = json.loads((bundle / "timings.json").read_text())
    (it,) = [c for c in t["callables"] if c["mode"] == "iteration"]
    assert it["source"] == "optimizer_step" and it["name"] == "AdamW.step" and it["clock"] == "host"
    assert it["calls"] == 20 and len(it["steps"]) == 19
    phases = [s["phase"] for s in it["steps"]]
    assert phases[:3] == ["warmup"] * 3 and set(phases[3:]) == {"steady"}
    early = sorted(s["duration_ms"] for s in it["steps"] if s["phase"] == "steady" and s["step"] < 10)
    late = sorted(s["duration_ms"] for s in it["steps"] if s["step"] >= 11)
    assert early[len(early) // 2] + 20 < late[len(late) // 2]      # +30 ms of host work per step
    assert late[0] >= 40
    assert t["peak_rss_bytes"] > 50 * 2**20 and t["compile_time_s"] > 0

    store = open_store(tmp_path / "db" / "cw.duckdb")
    report = ingest_paths(store, [bundle])
    assert report.ok, [(f.name, f.message) for f in report.files]
    with store.read() as con:
        n, steady = con.execute("SELECT count(*), count(*) FILTER (phase = 'steady') FROM step_timings "
                                "WHERE mode = 'iteration' AND callable = 'AdamW.step'").fetchone()
        src, rss = con.execute("SELECT iteration_source, peak_rss_bytes FROM timing_summaries").fetchone()
    assert (n, steady) == (19, 16) and src == "optimizer_step" and rss == t["peak_rss_bytes"]
