"""Hook overhead: the same compiled job with and without compilewatch's timing hooks, in one run.

    python benchmarks/bench_hooks_overhead.py --device cuda --workloads resnet50:train,resnet18:train,gpt2:train,mlp:infer

For each workload one model is compiled once; "plain" calls the compiled module directly, "hooked"
calls it through the hooks' timing path (collectors.hooks._timed, exactly what the injected
sitecustomize puts in front of every torch.compile'd callable). Blocks of --block steps alternate
plain, hooked, hooked, plain, ... so clock drift and thermal state hit both alike; each block is
timed with one pair of CUDA events (host clock on CPU) around the whole block, so the measurement
itself is the same for both. Reported: median block step time of each, and their ratio
(target <= 1.01). As an honesty check for inference workloads, the hooks' own steady-state median
(CUDA events per call) is printed next to the externally measured step time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default=None)
    p.add_argument("--workloads", default="mlp:infer", help="model:task,... (built-in models)")
    p.add_argument("--mode", default="default")
    p.add_argument("--block", type=int, default=20, help="steps per timed block")
    p.add_argument("--blocks", type=int, default=10, help="blocks per variant")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--amp", action="store_true")
    p.add_argument("--json", default=None, help="write results here")
    args = p.parse_args(argv)

    import torch

    from collectors import hooks
    from collectors.models import build, split_call

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device == "cuda"
    compile_fn = hooks.ORIGINAL_COMPILE or torch.compile
    results = []
    for spec in args.workloads.split(","):
        name, _, task = spec.partition(":")
        task = task or "train"
        wl = build(name, device)
        train = task == "train"
        wl.model.train(train)
        compiled = compile_fn(wl.model, mode=None if args.mode == "default" else args.mode, **wl.compile_kwargs)
        timer = hooks.RECORDER.timer(f"{name}.forward", "compiled")
        plain = compiled

        def hooked(*a, **k):
            return hooks._timed(timer, compiled, a, k)

        opt = torch.optim.SGD(wl.model.parameters(), lr=1e-4, momentum=0.9) if train else None
        nb = max(1, wl.distinct_batches)
        batches = [wl.make_batch(i) for i in range(nb)]
        use_amp = args.amp and cuda

        def run(fn, n, start):
            for i in range(start, start + n):
                batch = batches[i % nb]
                a, k = split_call(batch)
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
                    if train:
                        opt.zero_grad(set_to_none=True)
                        loss = wl.loss(fn(*a, **k), batch)
                    else:
                        with torch.no_grad():
                            fn(*a, **k)
                if train:
                    loss.backward()
                    opt.step()

        def block(fn, start):
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                run(fn, args.block, start)
                e1.record()
                e1.synchronize()
                return e0.elapsed_time(e1) / args.block
            t0 = time.perf_counter()
            run(fn, args.block, start)
            return (time.perf_counter() - t0) * 1e3 / args.block

        t0 = time.perf_counter()
        run(plain, args.warmup, 0)          # compiles
        compile_s = time.perf_counter() - t0
        run(hooked, args.warmup, 0)         # the hooks' first call + warm-up
        times = {"plain": [], "hooked": []}
        order = ["plain", "hooked", "hooked", "plain"]
        for b in range(args.blocks * 2):
            which = order[b % 4]
            times[which].append(block(plain if which == "plain" else hooked, b * args.block))
        mp, mh = statistics.median(times["plain"]), statistics.median(times["hooked"])
        td = timer.to_dict()
        r = {"workload": spec, "device": device, "mode": args.mode, "compile_s": round(compile_s, 2),
             "plain_ms": round(mp, 4), "hooked_ms": round(mh, 4), "ratio": round(mh / mp, 4),
             "plain_iqr_ms": round(_iqr(times["plain"]), 4), "hooked_iqr_ms": round(_iqr(times["hooked"]), 4),
             "hooks_steady_median_ms": td["steady_median_ms"], "hooks_sample_every": td["sample_every"],
             "hooks_calls": td["calls"], "blocks": args.blocks, "block_steps": args.block}
        results.append(r)
        print(json.dumps(r), flush=True)
        del compiled, wl, opt, batches
        torch._dynamo.reset()
        if cuda:
            torch.cuda.empty_cache()

    print(f"\n{'workload':22} {'plain ms':>10} {'hooked ms':>10} {'ratio':>7}  {'hooks median':>12} {'every':>5}")
    for r in results:
        print(f"{r['workload']:22} {r['plain_ms']:>10.4f} {r['hooked_ms']:>10.4f} {r['ratio']:>7.4f}  "
              f"{r['hooks_steady_median_ms'] if r['hooks_steady_median_ms'] is not None else float('nan'):>12.4f} {r['hooks_sample_every']:>5}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def _iqr(v):
    s = sorted(v)
    q = lambda f: s[int((len(s) - 1) * f)]
    return q(0.75) - q(0.25)


if __name__ == "__main__":
    sys.exit(main())
