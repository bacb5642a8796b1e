"""Per-compile-id artifacts out of the store: list them cheaply, fetch one payload when asked.

A listing never reads a payload; one artifact is addressed by (run_id, file_id, line_no) and read
on its own, so a page or a terminal gets only what it shows: out of its file's raw copy at the place
its row names (raw_offset, raw_length), or decompressed from ``payload_z`` (a gzipped file's; see
ingest/trace/parsers/artifacts.py).
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from compilewatch.core.errors import NotFoundError, StoreError
from compilewatch.ingest.trace.envelope import read_one
from compilewatch.store.files import location_of

# What a reader calls each kind, in the order tlparse lists a compile's outputs.
TITLES = {
    "dynamo_start": "Stack (dynamo_start)",
    "dynamo_output_graph": "Dynamo output graph",
    "dynamo_guards": "Guards",
    "dynamo_cpp_guards_str": "Guards (C++ guard tree)",
    "aot_joint_graph": "AOT joint graph",
    "aot_forward_graph": "AOT forward graph",
    "aot_backward_graph": "AOT backward graph",
    "aot_inference_graph": "AOT inference graph",
    "inductor_pre_grad_graph": "Inductor pre-grad graph",
    "inductor_post_grad_graph": "Inductor post-grad graph",
    "inductor_output_code": "Inductor output code",
    "symbolic_shape_specialization": "Symbolic shape specialisation",
    "propagate_real_tensors": "Real-tensor propagation",
    "propagate_real_tensors_provenance": "Real-tensor propagation (provenance)",
    "guard_added": "Symbolic guard added",
    "guard_added_fast": "Symbolic guard added (fast path)",
    "dynamo_graph_break_reason": "Graph break reason",
    "compiled_autograd_graph": "Compiled autograd graph",
    "optimize_ddp_split_graph": "DDP split graph",
    "optimize_ddp_split_child": "DDP split child",
    "graph_dump": "Graph dump",
    "dump_file": "Dumped source file",
    "exported_program": "Exported program",
    "link": "Link",
    "missing_fake_kernel": "Missing fake kernel",
    "mismatched_fake_kernel": "Mismatched fake kernel",
    "bwd_compilation_metrics": "Backward compile metrics",
    "compilation_metrics_runtime": "Runtime metrics (first calls, CUDA-graph recording)",
    "bwd_compilation_metrics_runtime": "Backward runtime metrics",
    "aot_autograd_backward_compilation_metrics": "Backward compile metrics (2.3-2.4)",
}
_CODE_KINDS = frozenset(("dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
                         "aot_inference_graph", "inductor_pre_grad_graph", "inductor_post_grad_graph",
                         "inductor_output_code", "compiled_autograd_graph", "optimize_ddp_split_graph",
                         "optimize_ddp_split_child", "graph_dump", "dump_file", "exported_program"))

_LIST_COLUMNS = "file_id, line_no, compile_id, rank, kind, name, encoding, size_bytes"


@dataclass(frozen=True)
class Artifact:
    file_id: int
    line_no: int
    compile_id: str | None
    rank: int | None
    kind: str
    name: str | None
    encoding: str
    size_bytes: int
    text: str

    @property
    def title(self) -> str:
        return title(self.kind, self.name)

    @property
    def language(self) -> str:
        return language(self.kind, self.name, self.encoding)

    def pretty(self) -> str:
        """JSON indented (as tlparse writes .json artifacts), anything else as logged."""
        if self.encoding == "json":
            try:
                return json.dumps(json.loads(self.text), indent=2, ensure_ascii=False)
            except ValueError:
                return self.text
        return self.text


def title(kind: str, name: str | None) -> str:
    name = name if isinstance(name, str) else None  # a missing name may arrive as NaN from a DataFrame
    if kind == "artifact":
        return name or "artifact"
    base = TITLES.get(kind, kind)
    return f"{base} · {name}" if name else base


def language(kind: str, name: str | None, encoding: str) -> str:
    name = name if isinstance(name, str) else None
    if encoding == "json":
        return "json"
    if kind in _CODE_KINDS or (kind == "artifact" and name and (name.endswith("_graph") or "graph_runnable" in name
                                                                  or name.endswith("BYTECODE"))):
        return "python"
    return "text"


def rows(con, sql: str, params: list) -> list[dict]:
    """One query on its own cursor (connections are not thread-safe) -> a dict per row."""
    cur = con.cursor()
    try:
        found = cur.execute(sql, params).fetchall()
        names = [d[0] for d in cur.description]
    finally:
        cur.close()
    return [dict(zip(names, r)) for r in found]


def list_artifacts(con, run_id: str, compile_id: str | None = None, *, all_ids: bool = False) -> list[dict]:
    """Artifacts of a run (of one compile id unless all_ids), in log order, without payloads."""
    sql = f"SELECT {_LIST_COLUMNS} FROM artifacts WHERE run_id = ?"
    params: list = [run_id]
    if not all_ids:
        sql += " AND compile_id IS NOT DISTINCT FROM ?"
        params.append(compile_id)
    sql += " ORDER BY file_id, line_no"
    return rows(con, sql, params)


def fetch(con, run_id: str, file_id: int, line_no: int) -> Artifact:
    """One artifact with its payload; NotFoundError when the run has none at that place."""
    cur = con.cursor()
    try:
        rows = cur.execute(f"SELECT {_LIST_COLUMNS}, payload_z, raw_offset, raw_length, "
                           "(SELECT any_value(stored_path) FROM files f WHERE f.file_id = a.file_id) "
                           "FROM artifacts a WHERE run_id = ? AND file_id = ? AND line_no = ? LIMIT 1",
                           [run_id, int(file_id), int(line_no)]).fetchall()
        if not rows:
            raise NotFoundError(f"run {run_id} has no artifact at file {file_id} line {line_no}",
                                "list the run's artifacts with `compilewatch show RUN COMPILE_ID`")
        *meta, blob, offset, length, stored_path = rows[0]
        if blob is None and offset is not None:
            data = _from_raw(location_of(cur), stored_path, offset, length, line_no)
        else:
            data = zlib.decompress(blob)
    finally:
        cur.close()
    return Artifact(*meta, text=data.decode("utf-8", "replace"))


def _from_raw(location, stored_path: str | None, offset: int, length: int, line_no: int) -> bytes:
    """An artifact's payload, read again out of its file's raw copy at the record's place (a ranged
    read where the copy lies on S3)."""
    if not stored_path:
        raise NotFoundError(f"the file of the artifact at line {line_no} has no raw copy recorded",
                            "ingest the file again to store its raw copy")
    path = location.uri(stored_path)
    try:
        data = location.read_bytes(stored_path, offset, length)
    except (OSError, StoreError) as e:
        raise NotFoundError(f"the raw copy of this artifact's file ({path}) cannot be read: "
                            f"{getattr(e, 'strerror', None) or e}",
                            "the store keeps every file's raw copy under raw/: restore it from a backup") from None
    env = read_one(data) if len(data) == length else None
    if env is None or env.line_no != 1:
        raise NotFoundError(f"the raw copy {path} no longer holds the record of line {line_no} at byte {offset}",
                            "the file under raw/ was changed after it was stored: restore it from a backup")
    return env.payload_bytes or b""


def find(con, run_id: str, compile_id: str | None, what: str) -> list[dict]:
    """Artifacts of one compile id whose kind or name is ``what`` (a prefix of the name also matches,
    so ``inductor_output_code`` and ``fx_graph_cache`` both work)."""
    return [a for a in list_artifacts(con, run_id, compile_id)
            if what in (a["kind"], a["name"]) or (a["name"] or "").startswith(what)]


def stacks(con, run_id: str) -> list[tuple[str | None, int | None, list]]:
    """(compile_id, rank, frames) of every dynamo_start of the run, in log order."""
    cur = con.cursor()
    try:
        rows = cur.execute("SELECT compile_id, rank, payload_z FROM artifacts WHERE run_id = ? AND kind = 'dynamo_start' "
                           "ORDER BY file_id, line_no", [run_id]).fetchall()
    finally:
        cur.close()
    out = []
    for cid, rank, blob in rows:
        try:
            frames = json.loads(zlib.decompress(blob))
        except (ValueError, zlib.error):
            continue
        out.append((cid, rank, frames if isinstance(frames, list) else []))
    return out


def specialisations(con, run_id: str, compile_id: str | None) -> list[dict]:
    """The compile id's symbolic_shape_specialization records, decoded: symbol, sources, value,
    reason, and the user frame that caused it (user_code, file:line in function)."""
    out = []
    for a in list_artifacts(con, run_id, compile_id):
        if a["kind"] != "symbolic_shape_specialization":
            continue
        v = json.loads(fetch(con, run_id, a["file_id"], a["line_no"]).text)
        user = (v.get("user_stack") or [None])[-1] or {}
        out.append({"symbol": v.get("symbol"), "sources": ", ".join(v.get("sources") or []), "value": v.get("value"),
                    "reason": v.get("reason"),
                    "user_code": f"{user.get('filename')}:{user.get('line')} in {user.get('name')}" if user else None})
    return out
