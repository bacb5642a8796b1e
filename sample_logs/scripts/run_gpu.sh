#!/bin/bash
# One GPU machine's share of sample_logs/: run from the repository root on a machine with one GPU.
#   bash sample_logs/scripts/run_gpu.sh TAG       (TAG names the machine kind, e.g. h100 or h200)
# Two jobs of one team, each with its own history, every run under `compilewatch collect`:
#   llama-pretrain   v1-clean x3, then v2-breaks x3       (graph break + recompiles)
#   llama-finetune   v1-clean x3, then v2-slow-step x3    (slower data path, same compiled graphs)
# then the timing hooks' overhead at GPU-bound sizes. Each version is a commit of its own in a
# scratch repository (so manifests carry distinct git commits); the script is train_llama.py.
# Everything kept goes to $OUT: the log, the overhead JSON and the bundles as one .tar.gz.
set -u
export PYTHONUNBUFFERED=1
TAG=${1:-gpu}
OUT=${OUT:-/tmp/cw-out}
REPO=$(pwd)
# The GPU host has torch but no compilewatch: install this tree (no dependencies; the collector needs none).
SITE=/tmp/cw-site
$PY -m pip install -q --no-deps --no-build-isolation --target "$SITE" "$REPO" || exit 1
W=/tmp/cw-$TAG
TEAM=/tmp/team
BUDGET=${BUDGET:-560}           # seconds for the whole script
PY=${PY:-python3}
JOB_ARGS=${JOB_ARGS:-}          # e.g. "--small --steps 20" for a try on a CPU
RUNS=${RUNS:-3}                 # runs of each version
WORKLOADS=${WORKLOADS-gpt2:train:32,resnet50:train:256}   # hooks-overhead workloads ("" skips)
mkdir -p "$OUT" "$W/bundles" "$W/logs" "$TEAM"
T0=$(date +%s)
LOG="$OUT/run-$TAG.log"
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
quiet() { grep -v -E '^[VIW][0-9]{4} ' ; }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  $PY -c "import torch, triton, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  nproc; command -v git || echo "no git: manifests carry no commit"
} 2>&1 | tee -a "$LOG"

commit_version() {   # the team's repository at version $1
  cp "$REPO/sample_logs/scripts/train_llama.py" "$TEAM/"
  sed -i "s/^DEFAULT_VERSION = .*/DEFAULT_VERSION = \"$1\"/" "$TEAM/train_llama.py"
  command -v git >/dev/null || return 0
  [ -d "$TEAM/.git" ] || git -C "$TEAM" init -q
  git -C "$TEAM" add train_llama.py
  git -C "$TEAM" -c user.name=team -c user.email=team@example.com commit -q --allow-empty -m "train_llama: $1"
}

collect() {          # model label version [script args...]
  local model=$1 label=$2 version=$3; shift 3
  local t=$(left)
  if [ "$t" -lt 60 ]; then echo "skip $model $label: ${t}s left" | tee -a "$LOG"; return; fi
  local s0 full rc
  s0=$(date +%s); full="$W/logs/$model-$label-$s0.txt"
  (cd "$TEAM" && PYTHONPATH="$SITE" timeout $(( t < 170 ? t - 10 : 160 )) $PY -m compilewatch collect \
      --model "$model" --label "$label" --out "$W/bundles" -- $PY train_llama.py --version "$version" $JOB_ARGS "$@") \
      >"$full" 2>&1
  rc=$?
  quiet <"$full" | grep -E '^version|peak memory|^done:|compilewatch:' | tee -a "$LOG"
  [ $rc = 0 ] || quiet <"$full" | tail -15 | tee -a "$LOG"
  echo "== $model $label: exit $rc, $(( $(date +%s) - s0 )) s" | tee -a "$LOG"
}

commit_version clean
for r in $(seq $RUNS); do collect llama-pretrain v1-clean clean; done
for r in $(seq $RUNS); do collect llama-finetune v1-clean clean --seed 1; done
commit_version breaks
for r in $(seq $RUNS); do collect llama-pretrain v2-breaks breaks; done
commit_version slow_step
for r in $(seq $RUNS); do collect llama-finetune v2-slow-step slow_step --seed 1; done
(cd "$W/bundles" && tar czf "$OUT/bundles-$TAG.tar.gz" --exclude='*.tmp' .)
(cd "$W" && tar czf "$OUT/logs-$TAG.tar.gz" logs)
ls -la "$OUT" | tee -a "$LOG"

# hooks' overhead (per-callable timer and iteration timer), GPU-bound sizes, alternating blocks
t=$(left)
if [ -n "$WORKLOADS" ] && [ "$t" -gt 60 ]; then
  timeout $(( t - 5 )) $PY benchmarks/bench_hooks_overhead.py --device cuda --amp --block 10 --blocks 30 \
      --workloads "$WORKLOADS" --json "$OUT/overhead-$TAG.json" 2>&1 | quiet | tee -a "$LOG"
else
  echo "hooks overhead: skipped, ${t}s left" | tee -a "$LOG"
fi
echo "run-$TAG took $(( $(date +%s) - T0 )) s" | tee -a "$LOG"
