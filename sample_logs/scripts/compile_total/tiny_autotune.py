"""A training step small enough that mode="max-autotune" autotunes its few matmul shapes in a
minute or two on one GPU: a two-layer MLP, AdamW, under torch.compile. Prints its own clock (the
seconds from its first line to the end of its first optimizer step) as one JSON line.

Usage: python tiny_autotune.py [--mode max-autotune] [--steps N]"""
import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--mode", default="max-autotune")
p.add_argument("--steps", type=int, default=20)
args = p.parse_args()
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.compile(mode=None if args.mode == "default" else args.mode)
def loss_fn(x):
    return model(x).square().mean()


first = None
for step in range(args.steps):
    x = torch.randn(128, 256, device=dev)
    loss = loss_fn(x)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if first is None:
        if dev == "cuda":
            torch.cuda.synchronize()
        first = time.time() - T0
print(json.dumps({"first_step_s": first, "mode": args.mode}), flush=True)
