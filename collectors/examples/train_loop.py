"""A plain training loop, as a team would write it, for trying `compilewatch collect` on:

    compilewatch collect --model resnet50 --label example -- python -m compilewatch.collectors.examples.train_loop --model resnet50 --steps 100

It knows nothing of compilewatch except the optional `step()` marker: the collector injects the
timing hooks, TORCH_LOGS and TORCH_TRACE from outside. Models come from collectors.models.
"""
from __future__ import annotations

import argparse
import contextlib

import torch

from compilewatch.collectors.models import build, split_call


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--mode", default=None, help="torch.compile mode")
    p.add_argument("--no-step-marker", action="store_true", help="don't use collectors.hooks.step()")
    args = p.parse_args(argv)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    wl = build(args.model, device, args.batch_size)
    model = torch.compile(wl.model, mode=args.mode, **wl.compile_kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    try:
        from compilewatch.collectors.hooks import step
    except ImportError:
        step = None
    n_batches = wl.distinct_batches or args.steps
    batches = [wl.make_batch(i) for i in range(n_batches)]
    for i in range(args.steps):
        batch = batches[i % n_batches]
        marker = step("train_step") if step and not args.no_step_marker else contextlib.nullcontext()
        with marker:
            a, k = split_call(batch)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                loss = wl.loss(model(*a, **k), batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if i % 20 == 0:
            print(f"step {i} loss {loss.item():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
