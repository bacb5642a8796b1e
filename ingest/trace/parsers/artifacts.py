"""Per-compile-id artifacts: the payloads tlparse writes into a compile id's folder (graphs, guards,
generated code, named ``artifact`` records) and the value-only records it renders beside them
(symbolic-shape specialisations, real-tensor propagation, links), one ``artifacts`` row each.

A payload is not copied when the file was read as it lies in the store's raw copy (a plain file,
not gzipped; TraceContext.raw_refs): the row holds the record's place in that copy (raw_offset,
raw_length: its envelope line up to the line that ended its payload), and the deep dive reads the
record from there again with the same reader (envelope.read_one). The payloads are most of a trace's
bytes: copying them into the database, compressed, cost the ingest a fifth of its time and the
store as much space again. A gzipped file cannot be read at an offset: its payloads are stored
zlib-compressed in payload_z (base64 on its way through the staging NDJSON; the loader decodes BLOB
columns). Value-only records are stored as their JSON value with interned file names resolved,
since the file's string table is gone once the file has been read.

A compile's graphs, guards and output code also get their fingerprint (``fp``: the normalised
text's hash, ingest/formats/artifact_text.py), while their payload is at hand: what a run compiled
is then compared per frame from the rollup of these (store/rollups.py, rollup_frame_fingerprints),
never by reading payloads again.
"""
from __future__ import annotations

from compilewatch.ingest.formats import subgraphs
from compilewatch.ingest.formats.artifact_text import PARTS, fingerprint
from compilewatch.ingest.jsonfast import dumps_line

# Envelope keys whose payload is the artifact (tlparse's SentinelFileParser list plus its named
# parsers). Their value is {} or a little metadata; NAME_KEY says which value key names the file.
PAYLOAD_EVENTS = (
    "dynamo_output_graph", "dynamo_guards", "dynamo_cpp_guards_str",
    "aot_forward_graph", "aot_backward_graph", "aot_joint_graph", "aot_inference_graph",
    "inductor_pre_grad_graph", "inductor_post_grad_graph", "inductor_output_code",
    "optimize_ddp_split_graph", "optimize_ddp_split_child", "compiled_autograd_graph",
    "graph_dump", "dump_file", "exported_program",
    "dynamo_graph_break_reason",  # 2.4 logged a break under its own key; 2.5+ as an artifact
)
NAME_KEY = {"inductor_output_code": "filename", "optimize_ddp_split_child": "name", "graph_dump": "name",
            "dump_file": "name", "artifact": "name", "link": "name"}
JSON_PAYLOADS = frozenset(("dynamo_guards",))

# Envelope keys without a payload whose value is what tlparse shows (symbolic_shape_specialization
# and guard_added_fast in compilation_metrics.html; guard_added / propagate_real_tensors in
# symbolic_guard_information.html; link in the compile directory).
VALUE_EVENTS = (
    "symbolic_shape_specialization", "propagate_real_tensors", "propagate_real_tensors_provenance",
    "guard_added", "guard_added_fast", "link", "missing_fake_kernel", "mismatched_fake_kernel",
    # 2.10+: the backward compile's metrics, and runtime records (CUDA-graph recording, autotuning at
    # first call) that come after the compile; kept per compile id and shown with its artifacts
    "bwd_compilation_metrics", "compilation_metrics_runtime", "bwd_compilation_metrics_runtime",
    "aot_autograd_backward_compilation_metrics",   # 2.3-2.4's name of the backward compile's record
)

_STACK_KEYS = ("stack", "user_stack")


def _fields(env, ctx, kind: str, name, encoding: str, size: int) -> dict:
    row = {"line_no": env.line_no, "compile_id": env.compile_id, "rank": env.rank, "kind": kind, "name": name,
           "encoding": encoding, "size_bytes": size}
    # which subgraph it is of (ingest/formats/subgraphs.py): a regional one named on the envelope, or
    # the vLLM piece whose compile start came last; and a vLLM post-grad pass's place and name
    sub = env.data.get(subgraphs.SUBGRAPH_NAME_KEY)
    if isinstance(sub, str) and sub:
        row["subgraph_name"] = sub
    if ctx.piece_line is not None:
        row["piece_line"] = ctx.piece_line
    if kind == "graph_dump":
        step = subgraphs.post_grad_pass(name)
        if step is not None:
            row["pass_index"], row["pass_name"] = step
        else:
            pattern = subgraphs.pattern_pass(name)
            if pattern is not None:
                row["pass_name"] = pattern
    return row


def _row(env, ctx, kind: str, name, encoding: str, data: bytes) -> None:
    # compressed beside the parser (trace/compressor.py); the row reaches the sink in order
    ctx.compressor.row("artifacts", _fields(env, ctx, kind, name, encoding, len(data)), "payload_z", data)


def payload_fingerprint(env) -> str | None:
    """The fingerprint of a graph's, guards' or output code's payload; None for any other payload.
    Needs nothing but the envelope: a trace read in ranges has it made by the process that read
    the record (ingest/trace_ranges.py), which then sends no payload bytes on."""
    if env.name not in PARTS or env.payload_bytes is None:
        return None
    return fingerprint(env.name, env.payload_bytes.decode("utf-8", "replace"))


def _payload_row(env, ctx, kind: str, name, encoding: str) -> None:
    """The envelope's payload as an artifact row: its place in the raw copy, or compressed here, or
    already by the process that read this part of the file (ingest/trace_ranges.py: the same bytes,
    compressed the same way)."""
    fp = env.prepared if env.payload_bytes is None else payload_fingerprint(env)
    if ctx.raw_refs and env.raw_start is not None:
        size = len(env.payload_bytes) if env.payload_bytes is not None else env.payload_size
        row = _fields(env, ctx, kind, name, encoding, size)
        row["raw_offset"], row["raw_length"] = env.raw_start, env.raw_end - env.raw_start
    elif env.payload_z is not None:
        row = _fields(env, ctx, kind, name, encoding, env.payload_size)
    else:
        row = _fields(env, ctx, kind, name, encoding, len(env.payload_bytes or b""))
        if fp is not None:
            row["fp"] = fp
        ctx.compressor.row("artifacts", row, "payload_z", env.payload_bytes or b"")
        return
    if fp is not None:
        row["fp"] = fp
    # in order after the rows before it; None: the payload stays in the raw copy
    ctx.compressor.compressed("artifacts", row, "payload_z", None if "raw_offset" in row else env.payload_z)


def _name(env, key):
    v = env.value
    n = v.get(NAME_KEY[key]) if key in NAME_KEY and isinstance(v, dict) else None
    return n if isinstance(n, str) else None


def parse_payload(env, ctx) -> None:
    """An envelope of PAYLOAD_EVENTS: its payload as logged (empty when torch logged none, as
    tlparse shows it)."""
    _payload_row(env, ctx, env.name, _name(env, env.name), "json" if env.name in JSON_PAYLOADS else "string")


def parse_artifact(env, ctx) -> None:
    """Any ``artifact`` envelope (``trace_structured_artifact``): name and encoding in the value."""
    v = env.value if isinstance(env.value, dict) else {}
    enc = v.get("encoding")
    _payload_row(env, ctx, "artifact", _name(env, "artifact"), enc if enc in ("json", "string") else "string")


def resolve_frames(frames, ctx):
    """A stack as logged, with each frame's interned filename replaced by the path."""
    if not isinstance(frames, list):
        return frames
    out = []
    for fr in frames:
        if isinstance(fr, dict) and "filename" in fr:
            fr = {**fr, "filename": ctx.intern(fr["filename"])}
        out.append(fr)
    return out


def parse_value(env, ctx) -> None:
    """An envelope of VALUE_EVENTS: its value as JSON, stacks resolved."""
    v = env.value
    if isinstance(v, dict):
        v = {k: (resolve_frames(x, ctx) if k in _STACK_KEYS else x) for k, x in v.items()}
    _row(env, ctx, env.name, _name(env, env.name), "json", dumps_line(v).rstrip(b"\n"))


def parse_stack(env, ctx) -> None:
    """``dynamo_start``: the user frames that led to this compile (for the stack trie)."""
    v = env.value
    stack = v.get("stack") if isinstance(v, dict) else None
    if not isinstance(stack, list):
        return
    _row(env, ctx, "dynamo_start", None, "json", dumps_line(resolve_frames(stack, ctx)).rstrip(b"\n"))


# The parsers that read an envelope's payload only to store it: an envelope that goes to these
# alone may arrive with its payload compressed already (ingest/trace_ranges.py).
STORERS = frozenset((parse_payload, parse_artifact))
