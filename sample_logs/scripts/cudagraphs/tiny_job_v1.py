"""Tiny compiled training job, version 1 (paired with tiny_job_v2.py).

What it runs: a two-layer MLP classifier (32 -> 64 -> 10) trained with SGD for --steps steps on
fixed random data; the module is torch.compile'd with the default mode, on the CPU.

Why: v1 and v2 are the same job with one change between them. v2 adds one op to the compiled
graph (`h.relu()`, a Tensor method, so no global gets guarded) behind a branch on a Python int
attribute (`self.act_mode == 1`), which dynamo turns into one extra guard. Comparing the two
shows how a one-op, one-guard code change appears in the FX graphs, guards and compile metrics.
Run it from a folder outside any git repository: the bundles then carry no git commit.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)
        return self.fc2(h)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = Net()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 32)
    y = torch.randint(0, 10, (64,))
    for i in range(args.steps):
        loss = nn.functional.cross_entropy(compiled(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 10 == 0 or i == args.steps - 1:
            print(f"step {i} loss {loss.item():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
