#!/usr/bin/env bash
# CPU sample runs under `python -m compilewatch collect` (CPU torch, one thread each).
#
# What it runs:
#   1. cpu_reduce_overhead_train.py (model mlp-reduce-overhead, label cpu-reduce-overhead), once:
#      torch.compile(mode="reduce-overhead") on a CPU-only machine, TORCH_LOGS with `cudagraphs`
#      added, to record what PyTorch says about CUDA graphs when there is no GPU.
#   2. tiny_job_v1.py / tiny_job_v2.py (model tiny-job, labels v1 / v2), twice each, from a scratch
#      folder outside any git repository; TORCH_LOGS with `guards` added so the guard sets of the
#      two versions can be compared in the text log as well as in the trace.
# Why: sample bundles for the ingest parsers. Every run gets an empty Inductor cache folder, so
# all runs compile cold and runs of one label are comparable.
#
# Usage: run_cpu.sh OUT_DIR   (environment: PY = python with torch and compilewatch installed (on a GPU host
#        without our dependencies: pip install --no-deps --target DIR . and PYTHONPATH=DIR),
#        SCRATCH = folder outside any git repository)
set -euo pipefail
OUT=$(realpath -m "${1:?usage: run_cpu.sh OUT_DIR}")
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
SCRATCH=${SCRATCH:-/tmp/scratch-job}
CACHES=$(mktemp -d /tmp/inductor-caches.XXXXXX)
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$SCRATCH"
cp "$HERE/tiny_job_v1.py" "$HERE/tiny_job_v2.py" "$HERE/cpu_reduce_overhead_train.py" "$SCRATCH/"

collect() {   # collect MODEL LABEL RUN LOGS SCRIPT ARGS...
    local model=$1 label=$2 run=$3 logs=$4; shift 4
    local tmp; tmp=$(mktemp -d "$OUT/.tmp.XXXXXX")
    ( cd "$SCRATCH" && TORCHINDUCTOR_CACHE_DIR="$CACHES/$model-$label-$run" \
        "$PY" -m compilewatch collect --model "$model" --label "$label" --logs "$logs" \
        --archive --out "$tmp" -- "$PY" "$@" )
    mv "$tmp"/*.tar.gz "$OUT/${model}_${label}_run${run}.tar.gz"
    rmdir "$tmp"
}

DEFAULT=graph_breaks,recompiles,perf_hints
collect mlp-reduce-overhead cpu-reduce-overhead 1 "$DEFAULT,cudagraphs" cpu_reduce_overhead_train.py
for run in 1 2; do
    collect tiny-job v1 "$run" "$DEFAULT,guards" tiny_job_v1.py
    collect tiny-job v2 "$run" "$DEFAULT,guards" tiny_job_v2.py
done
rm -rf "$CACHES"
ls -l "$OUT"
