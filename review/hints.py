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

LIMIT_HINT = (
    "The recompile limit was hit, so this function now runs eagerly from that point: fix the "
    "guard failure above rather than raising torch._dynamo.config.recompile_limit."
)


def guard_hint(category: str | None) -> str:
    return GUARD_HINTS.get(category or "other", GUARD_HINTS["other"])
