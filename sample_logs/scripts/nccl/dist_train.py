"""A small data-parallel training job with torch.compile, for real multi-rank NCCL bundles.

    compilewatch collect --model ddp-mlp --label v1-clean -- \
        torchrun --standalone --nproc_per_node=2 dist_train.py --wrap ddp
    ... --wrap ddp --diverge          rank 1 diverges
    ... --wrap fsdp [--diverge]       FSDP2 (fully_shard per block, then the root), then compile
    ... --wrap fsdp-blocks-compiled   each block a compiled module, then fully_shard: the fix
    ... --wrap fsdp-compiled-inside   compile each block, then fully_shard: the wrong order

--wrap:
  ddp                   torch.compile(DDP(model)), as PyTorch's DDP notes advise (DDPOptimizer splits
                        the graph at gradient-bucket boundaries).
  fsdp                  fully_shard(block) for each block, fully_shard(model), then
                        torch.compile(model).
  fsdp-blocks-compiled  model.blocks[i] = torch.compile(block), then fully_shard of each compiled
                        block and of the root; the root is not compiled (torchtitan's order).
  fsdp-compiled-inside  each block compiled first (block.compile()), then fully_shard on top, then
                        the whole model compiled too: FSDP2's hooks end up inside the compiled calls.
--diverge: rank 1 alone sees a shorter batch from step STEPS/2 on (a recompile only there) and
prints an activation inside forward (a graph break only there). Gradients keep their shapes, so
the collectives still match across ranks.
"""
from __future__ import annotations

import argparse
import contextlib
import os

import torch
import torch._inductor.debug
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, width: int, depth: int, chatty: bool):
        super().__init__()
        self.chatty = chatty
        self.inp = nn.Linear(32, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 8)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        if self.chatty:
            print("rank-local debug: activation mean", float(h.mean()))  # breaks the graph
        return self.head(h)


@torch.compile
def mean_across_ranks(loss):
    # the logged loss averaged over ranks: an all-reduce inside a compiled graph, so Inductor logs
    # its collective schedule (the inductor_collective_schedule artifact) on every rank
    t = loss.detach().clone()
    dist.all_reduce(t)
    return t / dist.get_world_size()


def wrap(model: nn.Module, how: str, device: torch.device):
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        return ddp, torch.compile(ddp)
    from torch.distributed.fsdp import fully_shard
    if how == "fsdp":
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
        return model, torch.compile(model)
    if how == "fsdp-blocks-compiled":
        for i, b in enumerate(model.blocks):
            model.blocks[i] = torch.compile(b)   # a wrapper module: fully_shard's hooks stay outside it
            fully_shard(model.blocks[i])
        fully_shard(model)
        return model, model
    if how == "fsdp-compiled-inside":
        for b in model.blocks:
            b.compile()
            fully_shard(b)
        fully_shard(model)
        return model, torch.compile(model)
    raise SystemExit(f"unknown --wrap {how}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--wrap", default="ddp", choices=("ddp", "fsdp", "fsdp-blocks-compiled", "fsdp-compiled-inside"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--diverge", action="store_true")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    torch.manual_seed(0)
    diverge_here = args.diverge and rank == 1
    model = Net(args.width, args.depth, chatty=diverge_here).to(device)
    params_of, compiled = wrap(model, args.wrap, device)
    opt = torch.optim.AdamW(params_of.parameters(), lr=1e-3)
    # every compiled graph's calls, in order, logged at the end (the graph_execution artifact)
    order = getattr(torch._inductor.debug, "record_and_log_graph_execution_order", None)
    with order() if order is not None else contextlib.nullcontext():
        train(args, rank, diverge_here, device, compiled, opt)
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def train(args, rank, diverge_here, device, compiled, opt) -> None:
    for i in range(args.steps):
        batch = args.batch - 24 if diverge_here and i >= args.steps // 2 else args.batch
        g = torch.Generator().manual_seed(1000 * rank + i)
        x = torch.randn(batch, 32, generator=g).to(device)
        y = torch.randn(batch, 8, generator=g).to(device)
        loss = nn.functional.mse_loss(compiled(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mean = mean_across_ranks(loss)
        if rank == 0 and i % 5 == 0:
            print(f"step {i} loss {mean.item():.4f}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
