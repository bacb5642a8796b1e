"""CUDA graphs under `mode="reduce-overhead"`: why Inductor skipped them for a graph, and when it
records a new graph per input size. One place for the text torch prints and for the categories a
reader acts on (each with its fix hint), shared by the text parser and the trace's
``cudagraph_skip_reason`` field.

    W... cudagraph_utils.py:207] [__cudagraphs] skipping cudagraphs due to mutated inputs (1 instances). Found from :
    W... cudagraph_utils.py:207] [__cudagraphs]    File "/job/train.py", line 88, in track_logit_mean
    W... cudagraph_utils.py:207] [__cudagraphs]     ema.mul_(0.99).add_(logits.float().mean(dim=(0, 1)), alpha=0.01)
    W... cudagraph_utils.py:343] [__cudagraphs] CUDAGraph supports dynamic shapes by recording a new graph for
          each distinct input size. ... We have observed 9 distinct sizes. ...

The skip warning is printed at WARNING level, so it is in a job's log without TORCH_LOGS; torch
2.x phrases the reason as "mutated inputs", "cpu device (...)", "non-cuda device", "dynamic shape
input", "incompatible ops", "deterministic algorithms", "multiple devices"; a CPU-only job skips
cudagraphs silently (its counters say so, its log does not).
"""
from __future__ import annotations

import re

SKIP_START = "skipping cudagraphs due to "
RERECORD_START = "CUDAGraph supports dynamic shapes by recording a new graph"
TEXT_STARTS = (SKIP_START, RERECORD_START)
DISTINCT_SIZES = re.compile(r"observed (\d+) distinct sizes")
INSTANCES = re.compile(r"\((\d+) instances?\)")

# (category, words in the reason that mean it, fix hint); the first match wins
CATEGORIES = (
    ("mutated_input", ("mutated input", "mutation"),
     "An input of the compiled graph is changed in place (a buffer or a plain tensor updated with "
     "mul_/add_/copy_): CUDA graphs cannot replay that. Move the in-place update out of the compiled "
     "function, or let the function return the new value and assign it outside."),
    ("cpu_device", ("cpu device", "non-cuda device", "cpu ops", "cpu tensor"),
     "The graph touches a CPU tensor or copies to the host (.cpu(), .item(), a CPU scalar input): keep "
     "host transfers and CPU tensors outside the compiled region, or pass scalars as CUDA tensors."),
    ("dynamic_shape", ("dynamic shape", "distinct input size", "distinct sizes", "symint"),
     "Every new input size records a new CUDA graph (memory and recording time each): pad inputs to a "
     "few fixed sizes, or set torch._inductor.config.triton.cudagraph_skip_dynamic_graphs=True."),
    ("incompatible_op", ("incompatible op", "unsupported op", "cudagraph-unsafe", "cudagraph unsafe"),
     "An op in the graph cannot be captured (RNG on CPU, a sync, a custom op marked unsafe): move it out "
     "of the compiled region, or wrap it with torch.compiler.disable."),
    ("multiple_devices", ("multiple devices", "multi-device"),
     "The graph spans several devices: compile per device, or keep the graph on one GPU."),
    ("deterministic", ("deterministic",),
     "torch.use_deterministic_algorithms(True) with CUBLAS_WORKSPACE_CONFIG unset disables CUDA graphs: "
     "set the workspace config, or leave deterministic mode off for the compiled step."),
)
OTHER_HINT = "Read the reason in full on Run detail; `compilewatch show RUN COMPILE_ID` lists the graph."
HINTS = {c: h for c, _, h in CATEGORIES} | {"other": OTHER_HINT}


def categorise(reason: str | None) -> str:
    """The category of a skip reason as torch words it ("other" when none fits)."""
    text = (reason or "").lower()
    for category, words, _ in CATEGORIES:
        if any(w in text for w in words):
            return category
    return "other"


def skip_reason(first_line: str) -> tuple[str, int | None]:
    """("mutated inputs", 1) from "skipping cudagraphs due to mutated inputs (1 instances). Found from :"."""
    text = first_line[len(SKIP_START):] if first_line.startswith(SKIP_START) else first_line
    m = INSTANCES.search(text)
    reason = text.split(". Found from")[0]
    reason = INSTANCES.sub("", reason).strip().rstrip(".").strip()
    return reason, int(m.group(1)) if m else None
