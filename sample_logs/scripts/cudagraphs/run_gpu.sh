#!/usr/bin/env bash
# GPU sample runs of gpu_train.py under `python -m compilewatch collect`, one GPU.
#
# What it runs (model tiny-lm-ro, torch.compile mode="reduce-overhead", 200 steps each):
#   clean             x2  fixed shapes, CUDA graphs recorded once and replayed; cold Inductor cache
#   changed           x2  mutated input in a compiled helper + 10 sequence lengths + .cpu() in a
#                         compiled helper; cold Inductor cache
#   clean-warm-cache  x1  the code of `clean` again on the Inductor cache folder of clean run 2,
#                         so FX graph / AOTAutograd cache hits show in the trace
#   changed-fwd-mutation        x1  the mutated input inside the training graph's forward (its
#                                   backward gets re-recorded); `cudagraphs` log on
#   changed-fwd-mutation-nocglog x1 the same with the collector's default TORCH_LOGS only
# TORCH_LOGS: the collector's defaults (graph_breaks, recompiles, perf_hints) plus `cudagraphs`,
# except where said.
# Why: sample bundles for the ingest parsers: CUDA-graph skip reasons, re-recordings, recompiles
# and cache hit/miss records as PyTorch really writes them.
#
# Usage: run_gpu.sh OUT_DIR   (environment: PY = python with CUDA torch and compilewatch installed (on a GPU host
#        without our dependencies: pip install --no-deps --target DIR . and PYTHONPATH=DIR),
#        SCRATCH = folder outside any git repository)
# Writes OUT_DIR/<model>_<label>_run<N>.tar.gz, one per run; Inductor caches go to $CACHES.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: run_gpu.sh OUT_DIR}")
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
SCRATCH=${SCRATCH:-/tmp/scratch-job}
CACHES=${CACHES:-$(mktemp -d /tmp/inductor-caches.XXXXXX)}   # empty: every run but the warm one starts cold
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$SCRATCH" "$CACHES"
cp "$HERE/gpu_train.py" "$SCRATCH/"
DEFAULT_LOGS=graph_breaks,recompiles,perf_hints
MODEL=tiny-lm-ro

collect() {   # collect LABEL RUN CACHE_NAME LOGS ARGS...
    local label=$1 run=$2 cache=$3 logs=$4; shift 4
    local tmp; tmp=$(mktemp -d "$OUT/.tmp.XXXXXX")
    local t0=$SECONDS
    ( cd "$SCRATCH" && TORCHINDUCTOR_CACHE_DIR="$CACHES/$cache" \
        "$PY" -m compilewatch collect --model "$MODEL" --label "$label" --logs "$logs" \
        --timeout 170 --archive --out "$tmp" -- "$PY" gpu_train.py "$@" )
    local rc=$?
    mv "$tmp"/*.tar.gz "$OUT/${MODEL}_${label}_run${run}.tar.gz" && rmdir "$tmp"
    echo "== $MODEL $label run$run: exit $rc, $((SECONDS - t0)) s, cache $cache, logs $logs, $(date -u +%FT%TZ)"
}

echo "== start $(date -u +%FT%TZ)"
nvidia-smi -L || true
"$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'
CG="$DEFAULT_LOGS,cudagraphs"
collect clean 1 clean-1 "$CG" --version clean
collect clean 2 clean-2 "$CG" --version clean
collect changed 1 changed-1 "$CG" --version changed
collect changed 2 changed-2 "$CG" --version changed
collect clean-warm-cache 1 clean-2 "$CG" --version clean
collect changed-fwd-mutation 1 fwd-mutation-1 "$CG" --version changed-fwd-mutation
collect changed-fwd-mutation-nocglog 1 fwd-mutation-2 "$DEFAULT_LOGS" --version changed-fwd-mutation
echo "== end $(date -u +%FT%TZ)"
ls -l "$OUT"
