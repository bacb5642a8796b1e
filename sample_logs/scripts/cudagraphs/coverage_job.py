"""A small MLP trained with torch.compile(mode="reduce-overhead"), in three versions whose CUDA-graph
coverage differs: the job behind sample_logs/gpu-*-defaults/ (run_gpu_defaults.sh), collected with
the collector's default TORCH_LOGS (no --logs flag).

What it runs: a 3-layer MLP (width 512, batch 64), AdamW in eager, --steps steps (default 120);
the model's forward is compiled with mode="reduce-overhead" (Inductor CUDA graphs, cudagraph trees).

Versions (--version):
  one-graph  fixed shapes and nothing a CUDA graph cannot hold: the forward and backward graphs
             are recorded once and replayed every step.
  cpu-op     forward also returns the batch's mean activation moved to the host (.cpu() inside
             the compiled region, read every step for logging): a CPU op in the graph, so torch
             2.11+ splits the forward into a CUDA-graphed partition and one that runs outside
             (inductor.cudagraph_partitions), where older versions skip CUDA graphs for it.
  skip       as cpu-op, and a compiled monitoring helper updates a plain CUDA tensor in place
             every step (an EMA of the logits: a mutated input), so Inductor skips CUDA graphs
             for that helper ("skipping cudagraphs due to mutated inputs").
Why: a real bundle of each made with no --logs flag shows that the default logs carry the skip
reason, and the coverage the review words ("fell from 1 graph to 2 partitions plus a skip").
Runs on the CPU as well (a quick check), where CUDA graphs are not used at all.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn as nn

WIDTH, CLASSES, BATCH = 512, 10, 64


class MLP(nn.Module):
    def __init__(self, with_cpu_op: bool):
        super().__init__()
        self.with_cpu_op = with_cpu_op
        self.net = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
                                 nn.Linear(WIDTH, CLASSES))

    def forward(self, x: torch.Tensor):
        logits = self.net(x)
        if self.with_cpu_op:
            # the host copy a training loop makes for its log line, here inside the compiled region
            return logits, logits.detach().mean().cpu()
        return logits, None


def track_logits(ema: torch.Tensor, logits: torch.Tensor) -> None:
    # an in-place update of a tensor the compiled function does not own: a mutated graph input
    ema.mul_(0.99).add_(logits.detach().float().mean(dim=0), alpha=0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", choices=("one-graph", "cpu-op", "skip"), default="one-graph")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = MLP(with_cpu_op=args.version != "one-graph").to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = torch.compile(model, mode="reduce-overhead")
    helper = torch.compile(track_logits, mode="reduce-overhead") if args.version == "skip" else None
    ema = torch.zeros(CLASSES, device=dev)
    x = torch.randn(BATCH, WIDTH, device=dev)
    y = torch.randint(0, CLASSES, (BATCH,), device=dev)
    for step in range(args.steps):
        if dev.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()
        logits, host_mean = forward(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if helper is not None:
            helper(ema, logits)
        if step % 40 == 0 or step == args.steps - 1:
            extra = f" mean {float(host_mean):.4f}" if host_mean is not None else ""
            print(f"step {step} loss {loss.item():.4f}{extra}", flush=True)
    print(f"done: {args.version} on {dev}", flush=True)


if __name__ == "__main__":
    main()
