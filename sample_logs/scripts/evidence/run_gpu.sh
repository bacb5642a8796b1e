#!/bin/bash
# Real GPU runs for the review's host evidence: run from the repository root on a one-GPU machine.
#   bash sample_logs/scripts/evidence/run_gpu.sh TAG      (TAG names the machine kind, e.g. h100)
# settings-job (settings_job.py) under `compilewatch collect`, RUNS runs of each:
#   v1-tf32      the job as it was
#   v2-highest   one setting changed (float32 matmul precision "highest"): same graphs, slower step;
#                its settings name the change, its host probe says the machine ran as before
#   v1-loaded    v1 again while another process keeps the GPU busy: slower step, same settings;
#                the probe before and after says the host was slower
# Everything kept goes to $OUT: the log and the bundles as one .tar.gz.
set -u
export PYTHONUNBUFFERED=1
TAG=${1:-gpu}
OUT=${OUT:-/tmp/cw-out}
PY=${PY:-python3}
REPO=$(pwd)
RUNS=${RUNS:-2}
STEPS=${STEPS:-200}
JOB_ARGS=${JOB_ARGS:-}          # e.g. "--small --steps 20" for a try on a CPU
W=/tmp/cw-evidence-$TAG
SITE=/tmp/cw-site
mkdir -p "$OUT" "$W/bundles"
LOG="$OUT/evidence-$TAG.log"
# The GPU host has torch but no compilewatch: install this tree (no dependencies; the collector needs none).
$PY -m pip install -q --no-deps --no-build-isolation --target "$SITE" "$REPO" || exit 1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi"
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} 2>&1 | tee -a "$LOG"
JOB="$REPO/sample_logs/scripts/evidence/settings_job.py"

collect() {   # collect LABEL VERSION (from outside the tree: its compilewatch/ folder would shadow the installed package)
  (cd "$W" && $PY -m compilewatch collect --model settings-job --label "$1" --out "$W/bundles" -- \
      $PY "$JOB" --version "$2" --steps "$STEPS" $JOB_ARGS) 2>&1 | grep -v -E '^[VIW][0-9]{4} ' | tail -3 | tee -a "$LOG"
}

for i in $(seq "$RUNS"); do collect v1-tf32 tf32; done
for i in $(seq "$RUNS"); do collect v2-highest highest; done
# another process keeps the device busy for the loaded runs, probes included
$PY - <<'PY' &
import time, torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
a = torch.randn(4096, 4096, device=dev)
end = time.time() + 900
while time.time() < end:
    for _ in range(20):
        a = torch.mm(a, a).clamp_(-1, 1)
    if dev == "cuda":
        torch.cuda.synchronize()
PY
BURNER=$!
sleep 5
for i in $(seq "$RUNS"); do collect v1-loaded tf32; done
kill "$BURNER"
wait "$BURNER" 2>/dev/null

# what the evidence says, per label: settings that differ from v1-tf32, and the probe's verdict
# (needs duckdb and pandas, which a GPU host may lack: then read the bundles elsewhere)
$PY -c "import duckdb, pandas" 2>/dev/null && $PY - "$W/bundles" <<'PY' 2>&1 | tee -a "$LOG"
import sys, tempfile, pathlib
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from compilewatch.review.evidence import run_settings, settings_differ, probe_speed
db = pathlib.Path(tempfile.mkdtemp()) / "cw.duckdb"
store = open_store(db)
ingest_paths(store, sorted(pathlib.Path(sys.argv[1]).iterdir()))
with store.read() as con:
    runs = con.execute("SELECT label, list(run_id) FROM runs GROUP BY label").fetchall()
    by = dict(runs)
    it = dict(con.execute("SELECT r.label, median(m.value) FROM run_metrics m JOIN runs r USING (run_id) "
                          "WHERE metric = 'iteration_time' GROUP BY r.label").fetchall())
    frame = run_settings(con, [r for ids in by.values() for r in ids])
    for label in ("v2-highest", "v1-loaded"):
        if label not in by or "v1-tf32" not in by:
            continue
        print(f"{label} against v1-tf32: iteration {it.get(label)} ms against {it.get('v1-tf32')} ms")
        for c in settings_differ(by["v1-tf32"], by[label], frame):
            print("  setting:", c.sentence())
        ev = probe_speed(con, by["v1-tf32"], by[label])
        print("  probe:", ev.why if ev else "no probe")
PY
tar -czf "$OUT/evidence-$TAG-bundles.tar.gz" -C "$W" bundles
ls -la "$OUT"
