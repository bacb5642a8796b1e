"""What a compile's artifacts say once what differs between two runs of one program is made alike,
and the fingerprint of each: one place for it, read by the trace parser (a fingerprint per stored
graph, guard set and output code, ingest/trace/parsers/artifacts.py) and by `compilewatch diff`
(deepdive/diff.py), so that two compiles the diff calls alike have equal fingerprints.

Made alike: object ids and addresses, numbered generated names (`h_1`, `cpp_fused_relu_0`),
paths and line numbers in source comments, the cache folder in a kernel's path. Guards are compared as the set of their leaf expressions
(`EQUALS_MATCH: L['self'].act_mode == 1`), not as the tree's text, whose order and ids vary.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import PurePath

# The artifact kinds a compile is fingerprinted by, and the part of it each one is.
PARTS = {
    "dynamo_output_graph": "dynamo",
    "aot_forward_graph": "aot_fwd",
    "aot_inference_graph": "aot_fwd",     # the forward of a compile with no backward
    "aot_backward_graph": "aot_bwd",
    "inductor_output_code": "code",
    "dynamo_cpp_guards_str": "guards",
    "dynamo_guards": "guards",            # before the C++ guard tree (2.5): the guards as JSON
}
GUARD_TREE = "dynamo_cpp_guards_str"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# Two rules, ASCII words (what generated code names are):
#   ids    (?<![\w.])\d{7,}(?![\w.])      ___check_obj_id(x, 140400820326048) -> <id>
#   names  \b([A-Za-z_]\w*)_\d+\b          h_1, linear_2, cpp_fused_relu_0 -> h_N, linear_N, cpp_fused_relu_N
# applied as a search for what starts each (7 digits; `_` and digits ending a word) with the rest
# checked on the few found: the same result in 0.6 of the time (they were most of a fingerprint's
# cost, which every ingest pays; tests/ingest/test_artifact_text.py holds both to the patterns)
_ID_DIGITS = re.compile(r"\d\d\d\d\d\d\d+", re.A)
_NAME_NUMBER = re.compile(r"_\d+\b", re.A)
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_WORD_OR_DOT = _WORD | {"."}
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


def _ids(text: str) -> str:
    n = len(text)

    def one(m):
        s, e = m.span()
        if (s and text[s - 1] in _WORD_OR_DOT) or (e < n and text[e] in _WORD_OR_DOT):
            return m.group(0)
        return "<id>"
    return _ID_DIGITS.sub(one, text)


def _names(text: str) -> str:
    def one(m):
        s = i = m.start()
        while i and text[i - 1] in _WORD:
            i -= 1
        return "_N" if i < s and text[i] in _NAME_START else m.group(0)
    return _NAME_NUMBER.sub(one, text)
# a graph node's source comment: the path made its base name and the line left out, so an edit that
# moves a function (a line added above it) leaves its graphs alike; the code quoted after it stays
_FILE_COMMENT = re.compile(r"(# File: )(\S+?):\d+")
# Inductor names a kernel's file by its source's hash, in the run's cache folder: the folder differs
# between runs (and a warm run names the cold run's), the name does not
_KERNEL_PATH = re.compile(r"(# kernel path: )(\S+)")
_CALL = re.compile(r"^\s+\w+(?:: \"[^\"]*\")? = ([\w.]+)\(")
_KERNEL = re.compile(r"^(\w+) = async_compile\.(\w+)\(", re.M)
_GUARD_LEAF = re.compile(r"^[|\s]*\+- ([A-Z][A-Z_]+): (.*)$")
_COMMENT = re.compile(r"\s+#\s")


def normalise(text: str) -> str:
    """An artifact's text with what differs between runs of one program made alike."""
    text = _ids(_ADDRESS.sub("0x…", text))
    text = _FILE_COMMENT.sub(lambda m: m.group(1) + PurePath(m.group(2)).name, text)
    text = _KERNEL_PATH.sub(lambda m: m.group(1) + PurePath(m.group(2)).name, text)
    return _names(text)


def graph_ops(text: str) -> Counter:
    """The calls a printed FX graph makes, counted: `torch._C._nn.linear`, `.relu` (a method)."""
    ops: Counter = Counter()
    for line in text.splitlines():
        m = _CALL.match(line)
        if m:
            callee = m.group(1)
            head, _, method = callee.rpartition(".")
            # a method on a local value (h.relu) is the method; a module path (torch.ops.aten.mm) stays
            ops["." + method if head and "." not in head and not head.startswith(("torch", "operator")) else callee] += 1
    return ops


def guard_set(text: str) -> set[str]:
    """The leaf guards of a guard tree (`dynamo_cpp_guards_str`) or guard list, as expressions:
    `EQUALS_MATCH: L['self'].act_mode == 1`, ids and comments left out."""
    out = set()
    for line in text.splitlines():
        m = _GUARD_LEAF.match(line)
        if not m or m.group(1).endswith("GUARD_MANAGER") or m.group(1) == "GuardManager":
            continue
        expr = _COMMENT.split(m.group(2))[0].strip()
        out.add(f"{m.group(1)}: {_ids(_ADDRESS.sub('0x…', expr))}")
    return out


def kernels(text: str) -> Counter:
    """Inductor's generated kernels in an output code file, by name with its number made alike."""
    return Counter(_names(m.group(1)) for m in _KERNEL.finditer(text))


def comparable(kind: str, text: str) -> str:
    """What of an artifact two runs are compared on: a guard tree's sorted leaf guards, anything
    else its normalised text."""
    if kind == GUARD_TREE:
        return "\n".join(sorted(guard_set(text)))
    return normalise(text)


def fingerprint(kind: str, text: str) -> str:
    """16 hex digits naming what ``comparable`` keeps of an artifact (its kind included: an
    inference graph is not the forward graph of a training compile with the same text)."""
    return hashlib.blake2b(f"{kind}\n{comparable(kind, text)}".encode(), digest_size=8).hexdigest()


# --- a guard on a tensor: its device and dtype -----------------------------------------------
# A guard tree's TENSOR_MATCH leaf: check_tensor(L['x'], Tensor, DispatchKeySet(CPU, ...),
# torch.float32, device=None, requires_grad=False, size=[8, 16], stride=[16, 1])
_SOURCE = re.compile(r"[LG]\['[^']*'\](?:\.\w+|\[[^\]]*\])*")
_CHECK_TENSOR = re.compile(r"check_tensor\((?P<source>.*?), \w+, DispatchKeySet\((?P<keys>[^)]*)\), "
                           r"(?P<dtype>torch\.\w+), device=(?P<device>\w+)")
_DEVICE_KEYS = (("CUDA", "cuda"), ("XPU", "xpu"), ("MPS", "mps"), ("HIP", "cuda"), ("Meta", "meta"), ("CPU", "cpu"))


def guard_source(expr: str) -> str | None:
    """The local or global a guard reads (`L['x']`, `L['self'].blocks[0]`), the first it names."""
    m = _SOURCE.search(expr)
    return m.group(0) if m else None


def tensor_guard(expr: str) -> tuple[str, str, str] | None:
    """(source, device, dtype) of a TENSOR_MATCH guard expression; None for any other guard.
    Device as torch names it (`cpu`, `cuda:0`): the guard's device index where it has one, else
    the backend its dispatch keys name."""
    m = _CHECK_TENSOR.search(expr)
    if not m:
        return None
    keys = {k.strip() for k in m.group("keys").split(",")}
    backend = next((name for key, name in _DEVICE_KEYS if key in keys), "?")
    index = m.group("device")
    device = f"{backend}:{index}" if index.isdigit() and backend != "cpu" else backend
    return m.group("source"), device, m.group("dtype").removeprefix("torch.")
