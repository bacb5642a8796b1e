#!/usr/bin/env bash
# GPU sample runs of coverage_job.py under `compilewatch collect` with NO --logs flag (the
# collector's default TORCH_LOGS), one GPU, then what the default logs cost on that GPU.
#
# Run from the repository root:  bash sample_logs/scripts/cudagraphs/run_gpu_defaults.sh [OUT_DIR]
# What it runs (model mlp-coverage, torch.compile mode="reduce-overhead", 200 steps each, every run
# with an empty Inductor cache of its own):
#   one-graph  x2  fixed shapes: the forward and backward CUDA graphs recorded once and replayed
#   cpu-op     x2  a .cpu() inside the compiled forward: torch 2.11+ splits it into partitions
#   skip       x2  as cpu-op, plus a compiled helper that mutates an input: its CUDA graphs skipped
# then benchmarks/bench_default_logs.py --device cuda (previous default against the new, same job).
# Writes OUT_DIR/mlp-coverage_<version>_run<N>.tar.gz, OUT_DIR/bench_default_logs.json and
# OUT_DIR/run.log. The bundles go to sample_logs/gpu-<gpu>-torch<version>-defaults/ (e.g.
# sample_logs/gpu-h100-torch2.11-defaults/), where tests/app/test_cudagraph_defaults_gpu.py
# reads them; the JSON's medians go to the README's "Measured" table.
#
# Environment: PY = python with CUDA torch (the GPU host needs no compilewatch dependencies: this
# tree is installed with --no-deps into $SITE), SCRATCH = a folder outside any git repository.
set -uo pipefail
REPO=$(pwd)
OUT=$(realpath -m "${1:-/tmp/cw-defaults-out}")
PY=${PY:-python3}
SCRATCH=${SCRATCH:-/tmp/scratch-defaults}
SITE=${SITE:-/tmp/cw-site}
STEPS=${STEPS:-200}
BENCH_REPEAT=${BENCH_REPEAT:-2}   # pairs of benchmark runs; 0 skips the benchmark (about 7 min in all with 2)
MODEL=mlp-coverage
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$SCRATCH"
"$PY" -m pip install -q --no-deps --no-build-isolation --target "$SITE" "$REPO" || exit 1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
unset TORCH_LOGS
cp "$REPO/sample_logs/scripts/cudagraphs/coverage_job.py" "$SCRATCH/"
LOG="$OUT/run.log"

{
    echo "== start $(date -u +%FT%TZ)"
    nvidia-smi -L || true
    "$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'
    # no --logs: what a user who never heard of TORCH_LOGS gets; each run with a cold Inductor cache
    for run in 1 2; do
        for version in one-graph cpu-op skip; do
            bundles=$(mktemp -d "$OUT/.tmp.XXXXXX"); start=$SECONDS
            ( cd "$SCRATCH" && TORCHINDUCTOR_CACHE_DIR=$(mktemp -d /tmp/inductor-cache.XXXXXX) \
                "$PY" -m compilewatch collect --model "$MODEL" --label "$version" --timeout 240 --archive \
                --out "$bundles" -- "$PY" coverage_job.py --version "$version" --steps "$STEPS" )
            echo "== $MODEL $version run$run: exit $?, $((SECONDS - start)) s, $(date -u +%FT%TZ)"
            mv "$bundles"/*.tar.gz "$OUT/${MODEL}_${version}_run${run}.tar.gz" && rmdir "$bundles"
        done
    done
    if [ "$BENCH_REPEAT" -gt 0 ]; then
        "$PY" "$REPO/benchmarks/bench_default_logs.py" --device cuda --repeat "$BENCH_REPEAT" --steps "$STEPS" \
            --python "$PY" --json "$OUT/bench_default_logs.json"
    fi
    echo "== end $(date -u +%FT%TZ)"
    ls -l "$OUT"
} 2>&1 | tee -a "$LOG"
