"""The compile caches' keys as torch logs them, and which part of a key each component is.

Inductor's FX graph cache (``torch/_inductor/codecache.py``) hashes an ``FxGraphHashDetails``, and
AOTAutograd's cache (``torch/_functorch/_aot_autograd/autograd_cache.py``) an
``AOTAutogradCacheDetails`` built on it. ``FxGraphCachePickler.debug_lines`` writes one line per
attribute of those details, or per item of a list or dict attribute, each with the hash of that
item alone::

    [djuhqpz2ufujssiypff4jphev7dwfonr32aomwkgjoe4jpgnifm] gm: <lambda>() ... def forward(self, arg0_1): ...
    [ixc2diriy66ra5bbfbyw6dyyxvcmt5inoq4of2ofgobfkdoknrb] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=...)
    [esstihe2nyydk4mhzpvox3qkajyu5y5t23hk3fi2me7jn75xi3o] inductor_config[size_asserts]: True

Where those lines go, torch 2.6 to 2.14:

- TORCH_TRACE: the ``fx_graph_cache_{hit,miss,bypass}`` artifacts (logged by compile_fx.py, and
  for a hit inside an AOTAutograd hit by aot_autograd_result.py) and ``aotautograd_cache_*`` are
  the JSON of the lookup's ``cache_info``: ``key``, ``components`` (the lines above),
  ``cache_state``, ``cache_event_time``, and for a bypass ``cache_bypass_reason`` and no key. The
  ``inductor_compile`` / ``backend_compile`` chromium events carry the same fields.
- AOTAutograd's components are logged only while its logger is at DEBUG from 2.12 on
  (``_get_debug_lines_for_cache_key``): a 2.11 trace has them, a 2.13 or 2.14 trace collected with
  the default TORCH_LOGS has ``"components": []``. Its key still changes with every part.
- TORCH_LOGS text at DEBUG (``+torch._inductor.codecache``): "FX graph cache hash details for key
  KEY:" and, for AOTAutograd, "Autograd graph cache hash details for key KEY:", then the lines.

The attributes over those versions, by part (anything else is ``other``): the graph (``gm``, user
Triton kernels' source); settings (``inductor_config[...]``, ``inductor_config_comms``,
``fx_kwargs[...]``, ``autograd_config``, ``aot_config``, ``cache_key_tag``, the deterministic and
matmul settings, thread count, default dtype, custom passes); the torch build (``torch_version``,
``system_info``); the inputs (``example_inputs[i]``, ``inputs_to_check``). A process group's name is
no attribute of its own: collectives carry it as an argument in the graph
(``_c10d_functional.all_reduce.default(x, 'sum', '0')``), so two graphs that differ only there
differ in the process group (``graph_change_part``).
"""
from __future__ import annotations

import re

GRAPH = "graph"
CONFIG = "config"
TORCH_VERSION = "torch_version"
INPUTS = "inputs"
PROCESS_GROUP = "process_group"
OTHER = "other"
# The order a reader is told them: causes from outside the program first, since they change what
# comes after (another torch writes other settings and graphs, other input shapes other constants
# in the graph), the graph last.
PARTS = (TORCH_VERSION, CONFIG, INPUTS, PROCESS_GROUP, GRAPH, OTHER)
PART_LABELS = {GRAPH: "the graph", CONFIG: "a setting", TORCH_VERSION: "the torch build",
               INPUTS: "the input metadata", PROCESS_GROUP: "a process-group name", OTHER: "another key component"}

# What a component's text is kept to: enough to show a setting or an input's metadata whole and a
# graph's first lines; the hash says whether two components differ, whatever was cut.
MAX_TEXT = 8000
# A component's text longer than this (an input's metadata, a graph) is stored once per file and
# hash: one parameter's metadata recurs in every lookup that takes it. A setting's value is shorter.
SHORT_TEXT = 100

_LINE = re.compile(r"\[(?P<hash>[0-9a-z]+)\] (?P<name>[^\s:\[]+(?:\[[^\]]*\])?): ?(?P<text>.*)", re.S)
_GRAPH_ATTRS = frozenset(("gm", "user_defined_triton_source", "triton_kernel_source_codes",
                          "saved_tensors_hooks_fx_wrap_cache_hashes", "sac_context_fn_hashes"))
_VERSION_ATTRS = frozenset(("torch_version", "system_info"))
_INPUT_ATTRS = frozenset(("example_inputs", "inputs_to_check"))
_CONFIG_ATTRS = frozenset((
    "fx_kwargs", "aot_config", "cache_key_tag", "deterministic_algorithms", "deterministic_algorithms_settings",
    "cuda_matmul_settings", "cpp_runtime_thread_count", "provenance_tracking_level", "provenance_tracking_to_timeline",
    "default_dtype", "default_cuda_device_index", "precompile_enabled", "grad_enabled", "disable_amp",
    "compile_on_one_rank", "cudagraph_override", "cudagraph_annotation", "region_activation_memory_budget",
    "custom_estimator_solver_uuids"))
_CONFIG_WORDS = re.compile(r"config|settings|custom|_pass(es)?$|partitioner")
# a functional collective's group name: its last quoted argument (2.3+ `_c10d_functional`, and the
# older `c10d_functional` with a tag, ranks and group size before it), or a group_name= keyword
_GROUP_ARG = re.compile(r"((?:_c10d_functional|c10d_functional|torch\.ops\._?c10d_functional)[\w.]*\(.*)'([^']*)'(\))")
_GROUP_KW = re.compile(r"(group_name\s*=\s*)'([^']*)'")


def split(line: str) -> tuple[str, str, str] | None:
    """(hash, name, text) of one component line; None for a line of another shape."""
    # str.partition first: a key has hundreds of lines, some of them graphs of many KB
    if line[:1] == "[":
        h, sep, rest = line[1:].partition("] ")
        name, sep2, text = rest.partition(": ")
        if sep and sep2 and h.isalnum() and " " not in name and ":" not in name:
            return h, name, text
    m = _LINE.fullmatch(line)
    return (m["hash"], m["name"], m["text"]) if m else None


def attr(name: str) -> str:
    """The details' attribute a component belongs to: ``inductor_config`` of ``inductor_config[debug]``."""
    return name.split("[", 1)[0]


def part_of(name: str) -> str:
    """Which part of the key a component (by its name) is: one of PARTS other than PROCESS_GROUP."""
    a = attr(name)
    if a in _GRAPH_ATTRS:
        return GRAPH
    if a in _VERSION_ATTRS:
        return TORCH_VERSION
    if a in _INPUT_ATTRS:
        return INPUTS
    if a in _CONFIG_ATTRS or _CONFIG_WORDS.search(a):
        return CONFIG
    return OTHER


def group_names(text: str) -> list[str]:
    """The process-group names a graph's collectives pass, in order."""
    out = []
    for line in text.splitlines():
        m = _GROUP_ARG.search(line)
        if m:
            out.append(m.group(2))
        out += [k.group(2) for k in _GROUP_KW.finditer(line)]
    return out


def _without_groups(text: str) -> str:
    text = "\n".join(_GROUP_ARG.sub(r"\1'<group>'\3", line) for line in text.splitlines())
    return _GROUP_KW.sub(r"\1'<group>'", text)


def graph_change_part(before: str, after: str, cut: bool = False) -> str:
    """The part two different graph components differ in: PROCESS_GROUP when, whole (``cut`` False),
    they differ only in their collectives' group names, else GRAPH."""
    if not cut and group_names(before) != group_names(after) and _without_groups(before) == _without_groups(after):
        return PROCESS_GROUP
    return GRAPH


def graph_role(components: dict[str, str]) -> str | None:
    """forward, backward or inference, from an FX graph key's ``fx_kwargs`` (name -> text)."""
    if components.get("fx_kwargs[is_backward]") == "True":
        return "backward"
    if components.get("fx_kwargs[is_inference]") == "True":
        return "inference"
    if components.get("fx_kwargs[is_backward]") == "False":
        return "forward"
    return None
