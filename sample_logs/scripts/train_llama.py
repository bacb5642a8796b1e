"""A team's language-model training job, in three versions, for sample logs that carry a verdict.

    compilewatch collect --model llama-pretrain --label v1-clean -- python train_llama.py --version clean

A small Llama-style decoder (RMSNorm, rotary attention, SwiGLU) trained with AdamW under bf16
autocast, the whole model under ``torch.compile`` and the loss in a compiled helper, as a team
would write it. It knows nothing of compilewatch: the collector brings the timing hooks, TORCH_LOGS
and TORCH_TRACE from outside.

``--version`` is the change a regression came from (each is an ordinary-looking edit):

- ``clean``: the corpus is tokenized once at start; every step takes fixed-length windows of it.
- ``breaks``: three "harmless" edits at once: a finite-activations check with ``.item()`` inside
  ``forward`` (a graph break, and a host sync in every step), a Python-float warm-up factor passed
  into the compiled loss helper (a recompile when it first changes), and variable-length batches
  (a recompile when the length first changes; same mean length as ``clean``).
- ``slow_step``: the data path tokenizes each batch on the fly, on the host, in the training loop,
  and copies it from pageable memory (which waits for the GPU). The compiled graphs are the same
  as ``clean``'s; only the time between optimizer steps (the iteration period) grows.

``--small`` shrinks the model and batch for a quick run on a CPU. The version can also come from
``DEFAULT_VERSION`` below, so that a version can be a commit of its own in a repository.
"""
from __future__ import annotations

import argparse
import math
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_VERSION = "clean"
VERSIONS = ("clean", "breaks", "slow_step")


# -- the tokenizer and the corpus (pure Python, as a simple in-house pipeline would be) ------------

def _syllables(rng: random.Random, n: int) -> list[str]:
    cons, vow = "bcdfghjklmnprstvwz", "aeiou"
    out = set()
    while len(out) < n:
        out.add(rng.choice(cons) + rng.choice(vow) + (rng.choice(cons) if rng.random() < 0.4 else ""))
    return sorted(out)


class Tokenizer:
    """Greedy longest-match subword tokenizer over a fixed vocabulary (whole words, then syllables)."""

    def __init__(self, vocab_size: int, seed: int = 0):
        rng = random.Random(seed)
        syl = _syllables(rng, 600)
        words = set()
        while len(words) < vocab_size - len(syl) - 28:
            words.add("".join(rng.choice(syl) for _ in range(rng.randint(2, 4))))
        self.pieces = ["<eos>", "<unk>"] + list("abcdefghijklmnopqrstuvwxyz") + syl + sorted(words)
        self.ids = {p: i for i, p in enumerate(self.pieces)}
        self.max_len = max(len(p) for p in self.pieces)
        self.eos = 0
        self._rng = rng
        self._words = sorted(words)
        self._syl = syl

    def encode(self, text: str) -> list[int]:
        ids, get, out = self.ids, self.ids.get, []
        for word in text.split():
            i, n = 0, len(word)
            while i < n:
                for j in range(min(n, i + self.max_len), i, -1):
                    t = get(word[i:j])
                    if t is not None:
                        out.append(t)
                        i = j
                        break
                else:
                    out.append(1)
                    i += 1
        return out

    def sample_text(self, rng: random.Random, n_words: int) -> str:
        # Zipf-like word frequencies plus unseen words (split into syllables by the tokenizer)
        w, s = self._words, self._syl
        out = []
        for _ in range(n_words):
            if rng.random() < 0.8:
                out.append(w[min(len(w) - 1, int(rng.paretovariate(1.1)) - 1)])
            else:
                out.append("".join(rng.choice(s) for _ in range(rng.randint(2, 5))))
        return " ".join(out)


# -- the model -----------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


def rope_tables(head_dim: int, max_len: int, base: float = 10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    f = torch.outer(torch.arange(max_len).float(), inv)
    return torch.cos(f), torch.sin(f)


def apply_rope(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.gate_up = nn.Linear(d, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        g, u = self.gate_up(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, ffn: int, max_len: int, check_finite: bool):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        cos, sin = rope_tables(d // heads, max_len)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.check_finite = check_finite

    def forward(self, tokens):
        s = tokens.shape[1]
        cos, sin = self.cos[:s], self.sin[:s]
        h = self.embed(tokens)
        for blk in self.blocks:
            h = blk(h, cos, sin)
        if self.check_finite and not torch.isfinite(h).all().item():
            # the "harmless" sanity check: a data-dependent branch on a host value
            raise FloatingPointError("non-finite activations")
        return self.head(self.norm(h))


@torch.compile
def lm_loss(logits, targets):
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


@torch.compile
def lm_loss_warmup(logits, targets, warmup: float):
    # z-loss weight ramped in over the first steps: the factor is a Python float
    lf = logits.float()
    ce = F.cross_entropy(lf.flatten(0, 1), targets.flatten())
    return ce + warmup * 1e-4 * torch.logsumexp(lf, dim=-1).pow(2).mean()


# -- the job -------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="train a small Llama-style decoder under torch.compile")
    p.add_argument("--version", choices=VERSIONS, default=DEFAULT_VERSION)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--dim", type=int, default=1536)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--small", action="store_true", help="CPU-sized: dim 128, 2 layers, batch 4 x 128, vocab 4096")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.small:
        a.dim, a.layers, a.heads, a.vocab, a.batch_size, a.seq_len = 128, 2, 4, 4096, 4, 128
    version = a.version
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    tok = Tokenizer(a.vocab, seed=a.seed)
    max_len = a.seq_len + a.seq_len // 8 + 1
    # variable lengths around seq_len, the same mean, multiples of 32 (as a bucketing loader makes)
    lengths = [a.seq_len + d for d in (-a.seq_len // 8, -a.seq_len // 16, 0, a.seq_len // 16, a.seq_len // 8)]

    t0 = time.perf_counter()
    if version != "slow_step":
        # tokenize the corpus once, keep it on the device; steps take random windows of it
        corpus = torch.tensor(tok.encode(tok.sample_text(rng, 200_000 if not a.small else 40_000)), dtype=torch.long)
        corpus = corpus.to(device)
    print(f"version {version}: data ready in {time.perf_counter() - t0:.1f} s", flush=True)

    def batch_from_corpus(length):
        starts = torch.randint(0, corpus.numel() - length - 1, (a.batch_size, 1), device=device)
        idx = starts + torch.arange(length + 1, device=device)
        w = corpus[idx]
        return w[:, :-1], w[:, 1:]

    def batch_on_the_fly(length):
        # the new data path: tokenize raw text per batch on the host, then copy (pageable: waits)
        rows = []
        for _ in range(a.batch_size):
            ids = tok.encode(tok.sample_text(rng, length * 3 // 4))
            while len(ids) < length + 1:
                ids += [tok.eos] + tok.encode(tok.sample_text(rng, length // 4))
            rows.append(ids[: length + 1])
        w = torch.tensor(rows, dtype=torch.long).to(device)
        return w[:, :-1], w[:, 1:]

    model = Llama(a.vocab, a.dim, a.layers, a.heads, 4 * a.dim * 2 // 3 // 64 * 64 + 64, max_len,
                  check_finite=version == "breaks").to(device)
    cmodel = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=device == "cuda")
    warmup_steps = 50
    t_start = time.perf_counter()
    for step in range(a.steps):
        length = rng.choice(lengths) if version == "breaks" else a.seq_len
        x, y = batch_on_the_fly(length) if version == "slow_step" else batch_from_corpus(length)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = cmodel(x)
        if version == "breaks":
            loss = lm_loss_warmup(logits, y, min(1.0, (step + 1) / warmup_steps))
        else:
            loss = lm_loss(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == a.steps - 1:
            print(f"step {step} loss {loss.item():.4f} ({time.perf_counter() - t_start:.1f} s)", flush=True)
    if device == "cuda":
        torch.cuda.synchronize()
        print(f"peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB", flush=True)
    print(f"done: {a.steps} steps in {time.perf_counter() - t_start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
