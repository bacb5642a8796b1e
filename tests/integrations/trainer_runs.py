"""Real trainer runs on the CPU (jobs/: Lightning and the Hugging Face Trainer, tiny models built
from code or a config, nothing downloaded), each through its CompileWatchCallback and, for the
comparison, wrapped by `compilewatch collect` with the callback off."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from compilewatch.ingest.bundle import read_manifest
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).resolve().parent / "jobs"
PY = sys.executable
# One thread: OpenMP spin-waiting on a shared 2-core box makes CPU runs crawl.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
ENV.pop("COMPILEWATCH_BUNDLE", None)


def run_job(script: str, version: str, out: Path, *extra: str, wrapped: Path | None = None, model: str | None = None):
    """Run jobs/<script> for `version` (and `extra` arguments), the callback writing under `out`;
    with `wrapped`, under `compilewatch collect --out wrapped` and with the callback off."""
    cmd = [PY, str(JOBS / script), "--version", version, "--out", str(out), *extra]
    if wrapped is not None:
        cmd = [PY, "-m", "compilewatch", "collect", "--out", str(wrapped), "--model", model, "--label", version,
               "--", *cmd, "--no-callback"]
    proc = subprocess.run(cmd, env=ENV, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def bundles(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "manifest.json").is_file()) if folder.is_dir() else []


def trainer_runs(tmp_path_factory, script: str, model: str) -> dict:
    """v1 and v2 through the callback, v1 wrapped with the callback off; all three ingested into
    one store. Returns the store, each bundle and the wrapped job's own --out folder."""
    root = tmp_path_factory.mktemp(script.split("_")[0])
    out = {}
    for version in ("v1", "v2"):
        run_job(script, version, root / version)
        (out[version],) = bundles(root / version)
    run_job(script, "v1", root / "callback-off", wrapped=root / "wrapped", model=model)
    (out["wrapped"],) = bundles(root / "wrapped")
    out["callback_off"] = root / "callback-off"
    out["db"] = root / "cw.duckdb"
    report = ingest_paths(open_store(out["db"]), [out["v1"], out["v2"], out["wrapped"]])
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return out


def stored(db: Path, bundle: Path) -> dict:
    """What the store says of one ingested bundle's run: the counts a review reads, and its
    iteration series."""
    run_id = read_manifest(bundle).run_id
    with open_store(db).read() as con:
        metrics = dict(con.execute("SELECT metric, value FROM run_metrics WHERE run_id = ? AND subject = '' "
                                   "AND metric IN ('graph_breaks', 'distinct_graph_breaks', 'recompiles', 'failures')",
                                   [run_id]).fetchall())
        compile_ids = con.execute("SELECT count(DISTINCT compile_id) FROM compiles WHERE run_id = ?", [run_id]).fetchone()[0]
        periods = con.execute("SELECT count(*), max(step) FROM step_timings WHERE run_id = ? AND mode = 'iteration'",
                              [run_id]).fetchone()
        source = con.execute("SELECT iteration_source FROM timing_summaries WHERE run_id = ?", [run_id]).fetchone()[0]
        model, label = con.execute("SELECT model, label FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return {"metrics": metrics, "compile_ids": compile_ids, "iteration_periods": periods[0],
            "last_iteration_step": periods[1], "iteration_source": source, "model": model, "label": label}


def check(db: Path, model: str) -> subprocess.CompletedProcess:
    """`compilewatch check` of label v2 against label v1 for `model`."""
    return subprocess.run([PY, "-m", "compilewatch", "check", "--db", str(db), "--baseline", f"label=v1,model={model}",
                           "--candidate", f"label=v2,model={model}", "--json"],
                          env=ENV, cwd=REPO, capture_output=True, text=True, timeout=300)


def assert_reads_like_wrapped(runs: dict, steps: int) -> None:
    """The callback's v1 run, ingested, against the wrapped v1 run: the same counts, compile ids,
    model and label, and an iteration series of the trainer's steps (one mark per optimizer step:
    steps - 1 periods, the last numbered steps - 1)."""
    callback, wrapped = stored(runs["db"], runs["v1"]), stored(runs["db"], runs["wrapped"])
    assert callback["iteration_source"] == "trainer_step"
    assert (callback["iteration_periods"], callback["last_iteration_step"]) == (steps - 1, steps - 1)
    for key in ("metrics", "compile_ids", "iteration_periods", "last_iteration_step", "model", "label"):
        assert callback[key] == wrapped[key], key
    assert callback["compile_ids"] >= 1
    v2 = stored(runs["db"], runs["v2"])
    assert v2["metrics"]["graph_breaks"] > callback["metrics"]["graph_breaks"] and v2["label"] == "v2"
