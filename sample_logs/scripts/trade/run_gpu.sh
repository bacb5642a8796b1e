#!/bin/bash
# Real GPU runs for the cause's trade: activation checkpointing, slower and lighter. On the CPU the
# peak memory a run records is the process's resident set, which torch itself fills, so the memory
# checkpointing saves is lost in its noise there; on a GPU it is CUDA's max_memory_allocated.
# Run from the repository root on a one-GPU machine:
#   bash sample_logs/scripts/trade/run_gpu.sh TAG      (TAG names the machine kind, e.g. h100)
# tests/fixtures/graphs/blocks_job.py under `compilewatch collect`, RUNS runs of each, alternated:
#   v1   the job as it is
#   v3   each block under torch.utils.checkpoint: other graphs, a slower step, a lower peak
# The bundles go to $OUT; `compilewatch check` of v3 against v1 runs where the store is (a GPU host
# may have no DuckDB), and its worse timing verdicts should read "...; the trade: peak memory -N% in
# the same runs".
set -u
export PYTHONUNBUFFERED=1
TAG=${1:-gpu}
OUT=${OUT:-/tmp/cw-out}
PY=${PY:-python3}
REPO=$(pwd)
RUNS=${RUNS:-3}
STEPS=${STEPS:-200}
# activations well past the weights, so the memory checkpointing saves is the peak's bulk
SIZE=${SIZE:---dim 1024 --batch 256 --seq 64}
W=/tmp/cw-trade-$TAG
SITE=/tmp/cw-site
mkdir -p "$OUT" "$W/bundles"
LOG="$OUT/trade-$TAG.log"
# The GPU host has torch but no compilewatch, and may have no network: the collector needs nothing
# beyond the standard library and torch, so the tree alone is installed.
$PY -m pip install -q --no-deps --no-build-isolation --target "$SITE" "$REPO" || exit 1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || echo "no nvidia-smi"
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} 2>&1 | tee -a "$LOG"
JOB="$REPO/tests/fixtures/graphs/blocks_job.py"

collect() {   # collect VERSION (from outside the tree: its compilewatch/ folder would shadow the installed package)
  (cd "$W" && $PY -m compilewatch collect --archive --model blocks-trade --label "$1" --out "$W/bundles" -- \
      $PY "$JOB" --version "$1" --steps "$STEPS" --device cuda $SIZE) 2>&1 | grep -v -E '^[VIW][0-9]{4} ' | tail -3 | tee -a "$LOG"
}

for i in $(seq "$RUNS"); do collect v1; collect v3; done
tar -czf "$OUT/trade-bundles-$TAG.tar.gz" -C "$W" bundles
