"""Built-in models for `compilewatch bench`.

Real architectures come from torchvision, timm and transformers when those are installed, always
built from their configs with random weights (nothing is downloaded). The small pure-torch models
reproduce the problems users hit with torch.compile, each in the way it usually happens.

A factory returns a Workload: the module, a function giving the inputs of step i (deterministic,
so eager and compiled see the same batches), and how to turn outputs into a loss.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Callable

from compilewatch.core.errors import ModelUnavailableError, UnknownModelError


@dataclass
class Workload:
    name: str
    model: object                                   # torch.nn.Module
    batch_size: int
    make_batch: Callable[[int], tuple]               # step -> (args, kwargs)
    loss: Callable[[object, tuple], object]          # (output, batch) -> scalar tensor
    distinct_batches: int = 4                        # batches cycled; 0 = a new shape every step
    compile_kwargs: dict = field(default_factory=dict)
    before_call: Callable[[object, int, tuple], None] | None = None   # (model, step, batch)
    problem: str = ""


@dataclass
class ModelSpec:
    name: str
    factory: Callable
    package: str | None
    default_batch: int
    description: str


REGISTRY: dict[str, ModelSpec] = {}


def register(name, package=None, batch=8, description=""):
    def deco(fn):
        REGISTRY[name] = ModelSpec(name, fn, package, batch, description)
        return fn
    return deco


def describe_models() -> str:
    lines = []
    for spec in REGISTRY.values():
        avail = "" if spec.package is None or importlib.util.find_spec(spec.package) else f"  [needs {spec.package}]"
        lines.append(f"{spec.name:18} batch {spec.default_batch:<4} {spec.description}{avail}")
    return "\n".join(lines)


def get_spec(name: str) -> ModelSpec:
    spec = REGISTRY.get(name)
    if spec is None:
        raise UnknownModelError(f"unknown model {name!r}; built-in: {', '.join(REGISTRY)}")
    if spec.package and importlib.util.find_spec(spec.package) is None:
        raise ModelUnavailableError(f"model {name!r} needs {spec.package}, which is not installed",
                                    f"pip install {spec.package}, or pass --skip-missing")
    return spec


def build(name: str, device: str, batch_size: int | None = None, seed: int = 0) -> Workload:
    import torch

    spec = get_spec(name)
    torch.manual_seed(seed)
    wl = spec.factory(device, batch_size or spec.default_batch)
    wl.model.to(device)
    return wl


def _gen(step: int, device: str):
    import torch
    g = torch.Generator(device="cpu")
    g.manual_seed(1000 + step)
    return g


def _randn(shape, step, device):
    import torch
    return torch.randn(*shape, generator=_gen(step, device)).to(device)


def _randint(high, shape, step, device):
    import torch
    return torch.randint(0, high, shape, generator=_gen(step, device)).to(device)


def _ce(out, batch):
    import torch.nn.functional as F
    return F.cross_entropy(out.float(), batch[1]["target"])


def _hf_loss(out, batch):
    return out.loss


def _mse(out, batch):
    return (out.float() - batch[1]["target"]).pow(2).mean()


# The wrapped model receives only args; kwargs carry the target (popped before the call).
def split_call(batch):
    args, kw = batch
    kw = {k: v for k, v in kw.items() if k != "target"}
    return args, kw


# -- real architectures -------------------------------------------------------------------------
def _torchvision(arch):
    def factory(device, bs):
        import torchvision
        model = getattr(torchvision.models, arch)(weights=None)
        return Workload(arch, model, bs,
                        lambda i: ((_randn((bs, 3, 224, 224), i, device),), {"target": _randint(1000, (bs,), i, device)}),
                        _ce)
    return factory


register("resnet18", "torchvision", 64, "torchvision ResNet-18, 224x224, random weights")(_torchvision("resnet18"))
register("resnet50", "torchvision", 64, "torchvision ResNet-50, 224x224, random weights")(_torchvision("resnet50"))


@register("vit_tiny", "timm", 64, "timm vit_tiny_patch16_224, random weights")
def _vit_tiny(device, bs):
    import timm
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    return Workload("vit_tiny", model, bs,
                    lambda i: ((_randn((bs, 3, 224, 224), i, device),), {"target": _randint(1000, (bs,), i, device)}),
                    _ce)


def _hf_lm(name, build_model, seq):
    def factory(device, bs):
        model = build_model()
        vocab = model.config.vocab_size

        def batch(i):
            ids = _randint(vocab, (bs, seq), i, device)
            return (), {"input_ids": ids, "labels": ids}
        return Workload(name, model, bs, batch, _hf_loss)
    return factory


def _bert():
    from transformers import BertConfig, BertForMaskedLM
    return BertForMaskedLM(BertConfig())            # bert-base-uncased's shape


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config())            # gpt2 (124M)'s shape


register("bert_base", "transformers", 16, "transformers BertForMaskedLM, bert-base config, seq 128, random weights")(_hf_lm("bert_base", _bert, 128))
register("gpt2", "transformers", 8, "transformers GPT2LMHeadModel, gpt2 (124M) config, seq 256, random weights")(_hf_lm("gpt2", _gpt2, 256))


# -- small pure-torch models that reproduce real problems --------------------------------------
def _mlp_module(width=256, depth=3):
    import torch.nn as nn
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, width))


def _fixed(name, model, bs, width, device, problem="", **kw):
    return Workload(name, model, bs,
                    lambda i: ((_randn((bs, width), i, device),), {"target": _randn((bs, width), i + 7, device)}),
                    _mse, problem=problem, **kw)


@register("mlp", None, 64, "clean 4-layer MLP: one graph, no breaks (the control)")
def _mlp(device, bs):
    return _fixed("mlp", _mlp_module(), bs, 256, device)


def _toy_classes():
    import torch
    import torch.nn as nn

    class ItemBranch(nn.Module):
        """`if h.mean().item() > 0`: a data-dependent Python branch -> graph break on .item()."""
        def __init__(self):
            super().__init__()
            self.inp, self.out = _mlp_module(depth=1), _mlp_module(depth=1)

        def forward(self, x):
            h = self.inp(x)
            if h.mean().item() > 0:
                h = torch.relu(h)
            else:
                h = torch.tanh(h)
            return self.out(h)

    class PrintForward(nn.Module):
        """A debugging print left in forward -> graph break on print()."""
        def __init__(self):
            super().__init__()
            self.inp, self.out = _mlp_module(depth=1), _mlp_module(depth=1)

        def forward(self, x):
            h = self.inp(x)
            print("hidden", tuple(h.shape))
            return self.out(h)

    class Scaled(nn.Module):
        """forward takes a Python number that changes every step (a schedule value, step count)."""
        def __init__(self):
            super().__init__()
            self.body = _mlp_module()

        def forward(self, x, scale):
            return self.body(x) * scale

    class TinyLM(nn.Module):
        """Embedding + one attention block, for sequence-length experiments."""
        def __init__(self, vocab=1000, d=128):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.block = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, dropout=0.0)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids):
            return self.head(self.block(self.emb(ids)))

    return ItemBranch, PrintForward, Scaled, TinyLM


@register("item_branch", None, 64, "data-dependent .item() branch in forward -> graph break")
def _item_branch(device, bs):
    return _fixed("item_branch", _toy_classes()[0](), bs, 256, device, problem="graph break: Tensor.item()")


@register("print_forward", None, 64, "print() in forward -> graph break")
def _print_forward(device, bs):
    return _fixed("print_forward", _toy_classes()[1](), bs, 256, device, problem="graph break: print")


_STORM_SIZES = 12   # more distinct shapes than torch._dynamo.config.recompile_limit (8)


@register("varying_batch", None, 16, "batch size changes every step, dynamic=False -> recompile storm up to the limit")
def _varying_batch(device, bs):
    wl = _fixed("varying_batch", _mlp_module(), bs, 256, device, problem="recompiles: batch size",
                compile_kwargs={"dynamic": False})
    wl.distinct_batches = 0

    def batch(i):
        b = bs + (i % _STORM_SIZES)
        return (_randn((b, 256), i, device),), {"target": _randn((b, 256), i + 7, device)}
    wl.make_batch = batch
    return wl


@register("varying_seqlen", None, 8, "sequence length changes every step, dynamic=False -> recompile storm up to the limit")
def _varying_seqlen(device, bs):
    model = _toy_classes()[3]()

    def batch(i):
        seq = 32 + 8 * (i % _STORM_SIZES)
        ids = _randint(1000, (bs, seq), i, device)
        return (ids,), {"target": ids}

    def loss(out, b):
        import torch.nn.functional as F
        return F.cross_entropy(out.float().flatten(0, 1), b[1]["target"].flatten())
    return Workload("varying_seqlen", model, bs, batch, loss, distinct_batches=0,
                    compile_kwargs={"dynamic": False}, problem="recompiles: sequence length")


@register("changing_constant", None, 64, "a Python float argument that changes every step -> guard failure, recompile")
def _changing_constant(device, bs):
    def batch(i):
        return (_randn((bs, 256), i, device), 1.0 + 0.01 * i), {"target": _randn((bs, 256), i + 7, device)}
    return Workload("changing_constant", _toy_classes()[2](), bs, batch, _mse, distinct_batches=0,
                    problem="recompiles: Python constant")


@register("dynamic_shapes", None, 16, "batch size changes every step but is marked dynamic -> one graph, no storm")
def _dynamic_shapes(device, bs):
    wl = _varying_batch(device, bs)
    wl.name = "dynamic_shapes"
    wl.compile_kwargs = {}
    wl.problem = "control: mark_dynamic on the batch dimension"

    def mark(model, step, batch):
        import torch
        torch._dynamo.mark_dynamic(batch[0][0], 0)
    wl.before_call = mark
    return wl
