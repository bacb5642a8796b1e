#!/bin/bash
# The device-machine run behind sample_logs/ (one call of the device tool per part):
#   bash benchmarks/bench_speedups_gpu.sh 1   hook overhead, ResNet speedups x3, the problem models
#   bash benchmarks/bench_speedups_gpu.sh 2   hook overhead again, transformers/timm speedups x3, GPU tests, max-autotune
#   bash benchmarks/bench_speedups_gpu.sh 3   hook overhead at GPU-bound sizes, reduce-overhead training and default inference, x2
#   bash benchmarks/bench_speedups_gpu.sh 4   collect on a training loop (+ a --timeout stop), the problem models again, ViT-tiny x3
# Everything it keeps goes to $OUT: logs, JSON summaries, and the bundles as one .tar.gz per part.
set -u
export PYTHONUNBUFFERED=1
PART=${1:-1}
OUT=${OUT:-/tmp/cw-out}
W=/tmp/cw-$PART
# The GPU host has torch but no compilewatch: install this tree (no dependencies; the collector needs none).
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/cw-site . || exit 1
export PYTHONPATH=/tmp/cw-site
mkdir -p "$OUT" "$W"
T0=$(date +%s)
LOG="$OUT/run$PART.log"
left() { echo $(( ${2} - ($(date +%s) - T0) )); }
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'python', sys.version.split()[0])"
  python3 -c "import torchvision, timm, transformers; print('torchvision', torchvision.__version__, 'timm', timm.__version__, 'transformers', transformers.__version__)"
  nproc
} 2>&1 | tee -a "$LOG"
quiet() { grep -v -E '^[VIW][0-9]{4} ' ; }
if [ "$PART" = 1 ]; then
  timeout 150 python3 benchmarks/bench_hooks_overhead.py --device cuda --amp --block 25 --blocks 10 \
      --workloads resnet18:train,mlp:train,mlp:infer --json "$W/overhead.json" 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 400) python3 benchmarks/bench_speedups.py --models resnet50,resnet18 --modes default --train --amp \
      --steps 30 --warmup 5 --repeats 3 --timeout 180 --budget $(left x 300) --out "$W/bench" \
      --summary "$W/speedups1.json" --quiet 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 520) python3 benchmarks/bench_speedups.py \
      --models mlp,item_branch,print_forward,changing_constant,varying_batch,varying_seqlen,dynamic_shapes \
      --modes default --train --steps 20 --warmup 3 --repeats 1 --timeout 90 --budget $(left x 480) \
      --out "$W/problems" --summary "$W/problems1.json" --quiet 2>&1 | quiet | tee -a "$LOG"
elif [ "$PART" = 2 ]; then
  timeout 200 python3 benchmarks/bench_hooks_overhead.py --device cuda --amp --block 20 --blocks 20 \
      --workloads resnet50:train,gpt2:train,resnet18:train,mlp:infer --json "$W/overhead2.json" 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 440) python3 benchmarks/bench_speedups.py --models bert_base,gpt2,vit_tiny --modes default --train --amp \
      --steps 50 --warmup 5 --repeats 3 --timeout 150 --budget $(left x 380) --out "$W/bench" \
      --summary "$W/speedups2.json" --quiet 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 490) python3 -m pytest -q -m gpu tests/collectors -p no:cacheprovider 2>&1 | tail -25 | tee -a "$LOG"
  timeout $(left x 530) python3 benchmarks/bench_speedups.py --models mlp --modes max-autotune --infer \
      --steps 30 --warmup 5 --repeats 1 --timeout 40 --out "$W/ma" --summary "$W/speedups_ma.json" --quiet 2>&1 | quiet | tee -a "$LOG"
elif [ "$PART" = 4 ]; then
  # a team's own loop under `collect` (hooks injected through sitecustomize), and one stopped by --timeout
  timeout 150 python3 -m compilewatch collect --model resnet50 --label example --out "$W/collect" -- \
      python3 -m compilewatch.collectors.examples.train_loop --model resnet50 --steps 100 2>&1 | quiet | tail -5 | tee -a "$LOG"
  timeout 100 python3 -m compilewatch collect --model gpt2 --label example-timeout --timeout 45 --out "$W/collect" -- \
      python3 -m compilewatch.collectors.examples.train_loop --model gpt2 --steps 100000 2>&1 | quiet | tail -5 | tee -a "$LOG"
  timeout $(left x 400) python3 benchmarks/bench_speedups.py \
      --models mlp,item_branch,print_forward,changing_constant,varying_batch,varying_seqlen,dynamic_shapes \
      --modes default --train --steps 20 --warmup 3 --repeats 1 --timeout 90 --budget $(left x 380) \
      --out "$W/problems" --summary "$W/problems4.json" --quiet 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 500) python3 benchmarks/bench_speedups.py --models vit_tiny --modes default --train --amp \
      --steps 50 --warmup 5 --repeats 3 --timeout 100 --budget $(left x 430) --out "$W/bench" \
      --summary "$W/speedups4.json" --quiet 2>&1 | quiet | tee -a "$LOG"
else
  # GPU-bound batch sizes (block-to-block noise of CPU-bound compiled steps on this VM hides a 1% effect)
  timeout 220 python3 benchmarks/bench_hooks_overhead.py --device cuda --amp --block 10 --blocks 30 \
      --workloads resnet50:train:256,gpt2:train:32,mlp:infer --json "$W/overhead3.json" 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 370) python3 benchmarks/bench_speedups.py --models resnet50,gpt2 --modes reduce-overhead --train --amp \
      --steps 50 --warmup 5 --repeats 2 --timeout 120 --budget $(left x 320) --out "$W/ro" \
      --summary "$W/speedups_ro.json" --quiet 2>&1 | quiet | tee -a "$LOG"
  timeout $(left x 520) python3 benchmarks/bench_speedups.py --models resnet50,bert_base --modes default --infer --amp \
      --steps 50 --warmup 5 --repeats 2 --timeout 100 --budget $(left x 440) --out "$W/infer" \
      --summary "$W/speedups_infer.json" --quiet 2>&1 | quiet | tee -a "$LOG"
fi
cd "$W" && tar czf "$OUT/bundles$PART.tar.gz" --exclude='*.tmp' . ; du -sh "$W"
# 8 files of 16 MB at most come back: cut a big archive into 15 MB parts (cat them to rejoin)
if [ "$(stat -c %s "$OUT/bundles$PART.tar.gz")" -gt 15000000 ]; then
  split -b 15000000 -d "$OUT/bundles$PART.tar.gz" "$OUT/bundles$PART.tar.gz.part" && rm "$OUT/bundles$PART.tar.gz"
fi
ls -la "$OUT"
echo "part $PART took $(( $(date +%s) - T0 )) s"
