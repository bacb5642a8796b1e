"""``vllm_compilation_config`` artifact: vLLM starts compiling a model (its payload, the config, is
stored by the artifact parser). What follows belongs to this model, not to the pieces of the one
before it."""
from __future__ import annotations


def parse(env, ctx) -> None:
    # pieces logged before the first config belong to the first model, as tlparse counts them
    if ctx.vllm_configs:
        ctx.vllm_model += 1
    ctx.vllm_configs += 1
    ctx.piece_line = None
