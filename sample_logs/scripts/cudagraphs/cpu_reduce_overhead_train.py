"""Tiny MLP regression trained with torch.compile(mode="reduce-overhead") on the CPU.

What it runs: a 3-layer MLP (64 -> 128 -> 128 -> 1) fitted to a fixed random target with AdamW,
for --steps steps at a fixed batch size; the whole module is torch.compile'd with
mode="reduce-overhead" and the optimizer runs in eager.

Why: reduce-overhead asks Inductor for CUDA graphs. On a CPU-only machine there is nothing to
capture, so Inductor drops CUDA graphs for these graphs; the run shows what a CPU-only
reduce-overhead job leaves in TORCH_LOGS (with the `cudagraphs` and `perf_hints` components),
in the TORCH_TRACE compilation_metrics records and in the dynamo counters of timings.json.
Nothing in the script knows about the collector.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 64, width: int = 128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, width), nn.GELU(),
            nn.Linear(width, width), nn.GELU(),
            nn.Linear(width, 1),
        )

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.net(x).squeeze(-1), y)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = MLP()
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, 64)
    y = torch.randn(args.batch_size)
    for i in range(args.steps):
        loss = compiled(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 20 == 0 or i == args.steps - 1:
            print(f"step {i} loss {loss.item():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
