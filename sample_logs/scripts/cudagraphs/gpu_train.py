"""Tiny decoder-only language model trained with torch.compile(mode="reduce-overhead").

What it runs: a 1-layer pre-norm transformer (width 256, 4 heads, causal attention through
scaled_dot_product_attention, GELU MLP, vocabulary 2048) on random token batches, AdamW in eager,
--steps steps (default 200). The model is torch.compile'd with mode="reduce-overhead" (Inductor
CUDA graphs, cudagraph trees), and so is a small token-accuracy helper called every 25 steps.

Versions of the same job (--version):
  clean     fixed batch 16 x 128 tokens; nothing stops CUDA graphs: the forward/backward graphs
            and the accuracy helper are recorded once and replayed.
  changed   three edits a team could make without noticing what they do to CUDA graphs:
            - a compiled monitoring helper keeps an EMA of the mean logits in a plain CUDA tensor
              it updates in place (a mutated graph input), called after every forward;
            - the sequence length cycles through 10 values (96..168), so dynamo recompiles once
              and then runs a dynamic-shape graph, and the cudagraph trees record one graph per
              distinct length (past 8 PyTorch warns about it);
            - the accuracy helper returns its result with .cpu() inside the compiled region
              (a CPU node in the graph: a graph partition, or a skip without partitions).
  changed-fwd-mutation
            as `changed`, but the EMA (of the hidden activations) is updated inside forward()
            itself, so the training graph has the mutated input and its forward runs outside
            CUDA graphs while the backward is recorded: the backward's inputs then change
            address every step and the cudagraph trees re-record it. (On torch 2.11 with the
            `cudagraphs` log on, this crashes inside PyTorch's re-record diagnostics.)
Why: sample logs of what CUDA-graph skips, re-recordings, recompiles and Inductor cache hits look
like in TORCH_LOGS (with the `cudagraphs` component) and in TORCH_TRACE. Runs on the CPU as well
(for a quick check), where CUDA graphs are simply not used.
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, LAYERS, MAX_LEN = 2048, 256, 4, 1, 256


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(MAX_LEN, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx, targets, act_ema=None):
        t = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            h = blk(h)
        h = self.ln_f(h)
        if act_ema is not None:   # changed-fwd-mutation: in-place update of a graph input
            act_ema.mul_(0.99).add_(h.detach().mean(dim=(0, 1)), alpha=0.01)
        logits = self.head(h)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return loss, logits.detach()


@torch.compile(mode="reduce-overhead")
def token_accuracy(logits, targets):
    return (logits.argmax(-1) == targets).float().mean()


@torch.compile(mode="reduce-overhead")
def track_logit_mean(ema, logits):   # changed: in-place update of a graph input
    ema.mul_(0.99).add_(logits.float().mean(dim=(0, 1)), alpha=0.01)


@torch.compile(mode="reduce-overhead")
def token_accuracy_to_host(logits, targets):   # changed: .cpu() inside the compiled region
    return (logits.argmax(-1) == targets).float().mean().cpu()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--version", choices=("clean", "changed", "changed-fwd-mutation"), default="clean")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    clean = args.version == "clean"
    fwd_mutation = args.version == "changed-fwd-mutation"

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    model = TinyLM().to(device)
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    act_ema = torch.zeros(WIDTH, device=device)
    logit_ema = torch.zeros(VOCAB, device=device)
    lengths = [128] if clean else list(range(96, 176, 8))
    accuracy = token_accuracy if clean else token_accuracy_to_host

    for i in range(args.steps):
        t = lengths[i % len(lengths)]
        data = torch.randint(0, VOCAB, (args.batch_size, t + 1), device=device)
        x, y = data[:, :-1], data[:, 1:]
        loss, logits = compiled(x, y, act_ema) if fwd_mutation else compiled(x, y)
        if args.version == "changed":
            track_logit_mean(logit_ema, logits)
        log_step = i % 25 == 0 or i == args.steps - 1
        # CUDA-graph outputs are reused by later replays: keep a copy of what is read after backward
        logits_for_log = logits.clone() if log_step else None
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log_step:
            loss_value = loss.item()   # before the next compiled call, which may reuse its memory
            acc = accuracy(logits_for_log, y)
            print(f"step {i} len {t} loss {loss_value:.4f} (ln V = {math.log(VOCAB):.2f}) "
                  f"acc {acc.item():.4f}", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
