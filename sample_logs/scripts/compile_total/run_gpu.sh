#!/usr/bin/env bash
# GPU check of compile time (forward + backward + runtime autotuning) and time to first step
# against the job's own clock: train_clock.py under `python -m compilewatch collect`, one GPU.
#
# What it runs (a 4-layer transformer encoder, batch 16 x 256, AdamW, 20 steps):
#   default-cold        torch.compile default mode, empty Inductor cache
#   default-warm        the same on that cache (FX graph / AOTAutograd hits: the backward is loaded
#                       with the forward, no bwd_compilation_metrics)
#   max-autotune-cold   mode="max-autotune", empty cache: compile-time and runtime autotuning
#   max-autotune-warm   the same on that cache
# Then ingests them and runs check.py, which prints per run the script's wait, time_to_first_step
# and compile_time with its forward / backward / runtime-autotuning split, and fails on a mismatch.
#
# Usage: run_gpu.sh OUT_DIR   (environment: PY = python with CUDA torch and compilewatch installed,
#        SCRATCH = folder outside any git repository)
set -uo pipefail
OUT=$(realpath -m "${1:?usage: run_gpu.sh OUT_DIR}")
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
SCRATCH=${SCRATCH:-/tmp/scratch-compile-total}
CACHES=$(mktemp -d /tmp/inductor-caches.XXXXXX)
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$SCRATCH"
cp "$HERE/train_clock.py" "$SCRATCH/"
for mode in default max-autotune; do
    for state in cold warm; do
        ( cd "$SCRATCH" && TORCHINDUCTOR_CACHE_DIR="$CACHES/$mode" \
            "$PY" -m compilewatch collect --model clock-train --label "$mode-$state" --timeout 500 \
            --out "$OUT" -- "$PY" train_clock.py --mode "$mode" ) || echo "run $mode-$state failed" >&2
    done
done
"$PY" -m compilewatch ingest --quiet --db "$OUT/cw.duckdb" "$OUT"
"$PY" "$HERE/check.py" "$OUT/cw.duckdb" "$OUT"/clock-train-*/
