"""Subgraphs a compile is split into, as TORCH_TRACE names them: one place for the artifact and
graph-dump names of vLLM's piecewise backend and of regional compilation, shared by the trace
parsers, the deep dive and the diff.

vLLM (its ``compilation/backends.py`` and ``piecewise_backend.py``) splits Dynamo's graph at its
splitting ops (attention) and compiles each piece for each compile range:

    {"artifact": {"name": "vllm_compilation_config", "encoding": "json"}, ...}       once per compiled model
    {"graph_dump": {"name": "vllm_piecewise_split_graph"}, ...}                      the split graph
    {"artifact": {"name": "vllm_piecewise_compile_start", "encoding": "json"}, ...}  one piece, one range:
        {"piecewise_index": 0, "submod_name": "submod_0", "total_piecewise_compiles": 33,
         "compile_range_start": 8, "compile_range_end": 8, "is_single_size": true,
         "is_cudagraph_capture_size": true}
    {"graph_dump": {"name": "vllm_submod_0"}, ...}                                   that piece's graph
    {"artifact": {"name": "before_post_grad_graph", ...}}                            before vLLM's passes
    {"graph_dump": {"name": "vllm_post_grad.0.FusionPass"}, ...}                     after pass 0, FusionPass
    {"graph_dump": {"name": "vllm_patterns.FusionPass"}, ...}                        that pass's patterns

The compile-start record carries no compile id: what follows it in the file (the piece's graph dump,
Inductor's artifacts, the post-grad passes) belongs to it until the next one, or until the next
compilation config starts another model (tlparse 0.4.8 groups them so, by compile range, then by
piece). Regional compilation (``torch.compiler.nested_compile_region``, Inductor's graph
partitions) instead names the subgraph on each record's envelope: ``"subgraph_name":
"repeated_subgraph0"``.
"""
from __future__ import annotations

import re

CONFIG = "vllm_compilation_config"
COMPILE_START = "vllm_piecewise_compile_start"
SPLIT_GRAPH = "vllm_piecewise_split_graph"
BEFORE_POST_GRAD = "before_post_grad_graph"
SUBMOD_PREFIXES = ("vllm_submod_", "vllm_subgraph_")
PATTERNS_PREFIX = "vllm_patterns."

# the envelope key of regional compilation's subgraph name (torch/_logging/structured.py)
SUBGRAPH_NAME_KEY = "subgraph_name"

_POST_GRAD = re.compile(r"vllm_post_grad\.(\d+)\.(.+)\Z")


def post_grad_pass(name) -> tuple[int, str] | None:
    """(index, pass name) of a ``vllm_post_grad.<index>.<PassName>`` graph dump, else None."""
    m = _POST_GRAD.match(name) if isinstance(name, str) else None
    return (int(m.group(1)), m.group(2)) if m else None


def pattern_pass(name) -> str | None:
    """The pass a ``vllm_patterns.<PassName>`` graph dump holds the patterns of, else None."""
    if isinstance(name, str) and name.startswith(PATTERNS_PREFIX) and len(name) > len(PATTERNS_PREFIX):
        return name[len(PATTERNS_PREFIX):]
    return None


def compile_range(start, end, single) -> str | None:
    """A piece's compile range as vLLM and tlparse show it: ``size 8`` or ``range [1, 8192]``."""
    if start is None:
        return None
    if single or end is None or end == start:
        return f"size {start}"
    return f"range [{start}, {end}]"


def piece_name(submod_name, index) -> str:
    """A piece's name: vLLM's submodule name, or ``subgraph_<index>`` when it logged none."""
    return submod_name if isinstance(submod_name, str) and submod_name else f"subgraph_{index}"
