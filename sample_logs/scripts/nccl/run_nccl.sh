#!/bin/bash
# The multi-rank NCCL share of sample_logs/: run from the repository root on a machine with 2 GPUs.
#   bash sample_logs/scripts/nccl/run_nccl.sh TAG      (TAG names the machine kind, e.g. h100x2)
# Every run is `compilewatch collect -- python -m torch.distributed.run` (torchrun) `--standalone
# --nproc_per_node=2 dist_train.py ...`
# (one TORCH_TRACE and one timings file per rank), RUNS times each:
#   ddp-mlp   v1-clean (DDP), v2-rank1-diverges (rank 1: shorter batch + print() in forward)
#   fsdp-mlp  v1-clean (fully_shard, then compile), v2-rank1-diverges,
#             v3-compiled-inside (each block compiled, then fully_shard: the wrong order),
#             v4-blocks-compiled (each block a compiled module, then fully_shard; no root compile)
# ONLY_FIX=1 runs v4 alone.
# Everything kept goes to $OUT: the log and the bundles as one .tar.gz.
set -u
export PYTHONUNBUFFERED=1
TAG=${1:-gpu2}
OUT=${OUT:-/tmp/cw-out}
REPO=$(pwd)
PY=${PY:-python3}
RUNS=${RUNS:-2}
STEPS=${STEPS:-20}
BUDGET=${BUDGET:-540}           # seconds for the whole script
SITE=/tmp/cw-site
W=/tmp/cw-$TAG
mkdir -p "$OUT" "$W/bundles" "$W/logs" "$W/job"
# The GPU host has torch but no compilewatch: install this tree (no dependencies; the collector needs none).
$PY -m pip install -q --no-deps --no-build-isolation --target "$SITE" "$REPO" || exit 1
cp "$REPO/sample_logs/scripts/nccl/dist_train.py" "$W/job/"
T0=$(date +%s)
LOG="$OUT/run-$TAG.log"
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
quiet() { grep -v -E '^(\[rank[0-9]+\]:)?[VIW][0-9]{4} ' ; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  $PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'python', sys.version.split()[0])"
  nproc
} 2>&1 | tee -a "$LOG"

collect() {          # model label [script args...]
  local model=$1 label=$2; shift 2
  local t=$(left)
  if [ "$t" -lt 45 ]; then echo "skip $model $label: ${t}s left" | tee -a "$LOG"; return; fi
  local s0=$(date +%s) full rc
  full="$W/logs/$model-$label-$s0.txt"
  (cd "$W/job" && PYTHONPATH="$SITE" timeout $(( t < 130 ? t - 5 : 120 )) $PY -m compilewatch collect \
      --model "$model" --label "$label" --out "$W/bundles" -- \
      $PY -m torch.distributed.run --standalone --nproc_per_node=2 dist_train.py --steps "$STEPS" "$@") >"$full" 2>&1
  rc=$?
  quiet <"$full" | grep -E '^step|compilewatch:|Error' | tail -4 | tee -a "$LOG"
  [ $rc = 0 ] || quiet <"$full" | tail -15 | tee -a "$LOG"
  echo "== $model $label: exit $rc, $(( $(date +%s) - s0 )) s, graph-break records $(grep -c -E 'Graph break( \([^)]*\))? in user code|Graph break: ' "$full")" | tee -a "$LOG"
}

if [ -n "${ONLY_FIX:-}" ]; then   # the fix for v3 alone
  for r in $(seq "$RUNS"); do collect fsdp-mlp v4-blocks-compiled --wrap fsdp-blocks-compiled; done
  RUNS=0
fi
for r in $(seq "$RUNS"); do
  collect ddp-mlp v1-clean --wrap ddp
  collect ddp-mlp v2-rank1-diverges --wrap ddp --diverge
  collect fsdp-mlp v1-clean --wrap fsdp
  collect fsdp-mlp v2-rank1-diverges --wrap fsdp --diverge
  collect fsdp-mlp v3-compiled-inside --wrap fsdp-compiled-inside
  collect fsdp-mlp v4-blocks-compiled --wrap fsdp-blocks-compiled
done
(cd "$W/bundles" && tar czf "$OUT/bundles-$TAG.tar.gz" --exclude='*.tmp' .)
(cd "$W" && tar czf "$OUT/logs-$TAG.tar.gz" logs)
ls -la "$OUT" | tee -a "$LOG"
echo "run-$TAG took $(( $(date +%s) - T0 )) s" | tee -a "$LOG"
