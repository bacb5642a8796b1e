"""Concrete fix hints for guard-failure categories (ingest.normalize's ``category`` values).

Kept as data so the pages, the report and the gate give the same advice.
"""
from __future__ import annotations

GUARD_HINTS: dict[str, str] = {
    "size_mismatch": (
        "A tensor size changed between calls (often the batch or sequence dimension). Compile with "
        "torch.compile(..., dynamic=True), or call torch._dynamo.mark_dynamic(x, dim) on the input before "
        "the first call; pad to a few bucketed sizes if shapes vary wildly."
    ),
    "stride_mismatch": (
        "The input's memory layout changed (a transpose, a slice, channels_last). Call .contiguous() "
        "(or pick one memory format) before the compiled function."
    ),
    "dtype": (
        "The same input arrived with another dtype (e.g. float32 in eval, bfloat16 under autocast). "
        "Cast once at the boundary, or compile separate functions per precision."
    ),
    "requires_grad": (
        "requires_grad flipped, typically train vs eval or torch.no_grad() around some calls. Keep the "
        "mode fixed per compiled function, or compile the eval path separately (torch.compile a wrapper "
        "called only under torch.no_grad())."
    ),
    "object_identity": (
        "A guard on an object's identity (ID_MATCH) failed: a new module, optimizer or closure instance "
        "per call. Create it once outside the loop, or pass it as an argument instead of capturing it."
    ),
    "type": (
        "An input changed Python type (list vs tuple, tensor vs int, None vs tensor). Normalise inputs "
        "to one type before calling the compiled function."
    ),
    "constant": (
        "A Python number or string is baked in as a constant and changed (step counter, learning rate, "
        "flag). Make it a tensor (torch.tensor(lr)), or mark it static if it truly changes rarely "
        "(torch._dynamo.config.allow_unspec_int_on_nn_module / mark_static)."
    ),
    "length": (
        "A list/tuple/dict changed length between calls. Pad to a fixed length, or pass a single "
        "stacked tensor instead of a variable-length list."
    ),
    "global_state": (
        "Global torch state changed between calls (grad mode, autocast, deterministic algorithms, "
        "default dtype). Set it once before compiling rather than toggling it per step."
    ),
    "dict_keys": (
        "A dict input arrived with other keys. Use a fixed set of keys (fill missing ones with None "
        "or zeros) or a dataclass."
    ),
    "other": (
        "Read the raw guard below; TORCH_LOGS=recompiles_verbose prints every failing guard, and "
        "torch._dynamo.config.recompile_limit bounds how often this can recompile."
    ),
}

_LIMIT_FIX = "fix the guard failure above rather than raising torch._dynamo.config.recompile_limit."
LIMIT_HINT = "The recompile limit was hit, so this function now runs eagerly from that point: " + _LIMIT_FIX


def limit_hint_for(functions: str) -> str:
    """LIMIT_HINT for a page that lists many functions: `functions` names those that hit it."""
    return f"{functions} hit the recompile limit, and from that point ran eagerly: " + _LIMIT_FIX


def guard_hint(category: str | None) -> str:
    return GUARD_HINTS.get(category or "other", GUARD_HINTS["other"])


# Graph breaks inside a distributed wrapper's own code: what to change is how the model was wrapped
# and compiled, which torch's own hint ("Avoid calling the function `disable`") does not say. A
# break is matched on the file torch reports it at, or on the wrapper's name in its reason or
# explanation: torch reports DDP's `_inside_ddp_forward` context manager at contextlib.py.
WRAPPER_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("torch/distributed/fsdp/", "FullyShardedDataParallel"), (
        "The compiled code reaches FSDP's hooks, which dynamo does not trace "
        "(torch._dynamo.config.skip_fsdp_hooks): it breaks there, and a break inside the root's loop "
        "over its blocks makes dynamo run that whole frame eagerly. Wrap "
        "each block in its own compiled module before sharding it, so the hooks stay outside the "
        "compiled code: model.blocks[i] = torch.compile(block), then fully_shard(model.blocks[i]) for "
        "every block and fully_shard(model) last, and do not compile the sharded root. block.compile() "
        "before fully_shard, or torch.compile of the whole sharded model, puts the hooks inside the "
        "compiled call and breaks there.")),
    (("torch/nn/parallel/distributed.py", "DistributedDataParallel"), (
        "The break is in DDP's own forward bookkeeping, traced because the DDP wrapper itself is "
        "compiled (torch.compile(DDP(model)), as PyTorch's DDP notes advise so that DDPOptimizer "
        "splits the graph at gradient-bucket boundaries). It costs a fall back to Python around the "
        "model's graph each step, not the model's graph; if that matters more than the overlap, "
        "compile the module inside DDP instead: DDP(torch.compile(model)).")),
)


def wrapper_hint(location: str | None, *texts: str | None) -> str | None:
    """The fix for a graph break in a distributed wrapper's code: `location` is the file torch
    reports the break at, `texts` its reason and explanation."""
    path = location.replace("\\", "/") if isinstance(location, str) else ""
    text = " ".join(t for t in texts if isinstance(t, str))
    for markers, hint in WRAPPER_HINTS:
        if any(m in path or (not m.startswith("torch/") and m in text) for m in markers):
            return hint
    return None
