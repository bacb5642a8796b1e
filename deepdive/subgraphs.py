"""A run's subgraphs read back, grouped as tlparse 0.4.8 shows them: vLLM's pieces by model, then
compile range, then piece, each with its artifacts and post-grad passes; regional compilation's
named subgraphs by compile id (ingest/formats/subgraphs.py says where each comes from in the log).

A subgraph has a key that names it the same way in every run of the program (a piece: the model's
place, its compile range and its submodule; a region: its name), so ``compilewatch diff`` pairs
subgraphs by that key before it pairs compile ids by frame and order.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from compilewatch.deepdive.artifacts import rows, title
from compilewatch.store.run_rows import remembered, run_filter

_ART_COLUMNS = ("file_id, line_no, compile_id, rank, kind, name, size_bytes, subgraph_name, piece_line, "
                "pass_index, pass_name")


@dataclass
class Subgraph:
    key: tuple                                 # ("piece", model, compile range, submodule) | ("region", name)
    label: str
    rank: int | None
    compile_ids: list[str] = field(default_factory=list)
    artifacts: list[dict] = field(default_factory=list)     # log order, without payloads
    info: dict = field(default_factory=dict)   # a piece's compile start: index, total, CUDA-graph size

    @property
    def kind(self) -> str:
        return self.key[0]

    @property
    def passes(self) -> list[dict]:
        return [a for a in self.artifacts if a["pass_index"] is not None]

    def places(self) -> dict[str, tuple[int, int]]:
        """Artifact label -> (file_id, line_no): its title, numbered (#2, #3) when it repeats."""
        seen: Counter = Counter()
        out = {}
        for a in self.artifacts:
            t = artifact_label(a)
            seen[t] += 1
            out[t if seen[t] == 1 else f"{t}#{seen[t]}"] = (a["file_id"], a["line_no"])
        return out


def artifact_label(a: dict) -> str:
    return a["name"] if a["kind"] in ("artifact", "graph_dump") and a["name"] else title(a["kind"], a["name"])


def _where_rank(rank: int | None) -> tuple[str, list]:
    return ("", []) if rank is None else (" AND rank IS NOT DISTINCT FROM ?", [rank])


def collect(con, run_id: str, rank: int | None = None) -> list[Subgraph]:
    """The run's subgraphs, vLLM pieces first (in their compile order), then regional ones (in the
    order their first artifact was logged). ``rank``: one rank's (None: every rank's). Read once per
    page render (run_rows.remembered): the run detail's pieces and regional tables both list them,
    and on DuckLake each read of the two tables is ~70 catalog round trips."""
    return remembered(("subgraphs", run_id, rank), lambda: _collect(con, run_id, rank))


def _collect(con, run_id: str, rank: int | None) -> list[Subgraph]:
    flt, extra = _where_rank(rank)
    run = run_filter(con, run_id)   # the run's rows only, not a scan of every run's (store/run_rows.py)
    starts = rows(con, "SELECT file_id, line_no, rank, vllm_model, piecewise_index, submod_name, total_pieces, "
                       f"compile_range, is_cudagraph_size FROM piecewise_compiles WHERE {run}{flt} "
                       "ORDER BY file_id, line_no", [run_id] + extra)
    arts = rows(con, f"SELECT {_ART_COLUMNS} FROM artifacts WHERE {run}{flt} AND kind <> 'dynamo_start' "
                     "AND (piece_line IS NOT NULL OR subgraph_name IS NOT NULL) ORDER BY file_id, line_no",
                [run_id] + extra)
    pieces: dict[tuple, Subgraph] = {}
    for s in starts:
        key = ("piece", s["vllm_model"], s["compile_range"], s["submod_name"])
        label = (f"{s['submod_name']} · {s['compile_range'] or 'no range'}"
                 + (f" · model {s['vllm_model']}" if s["vllm_model"] else ""))
        sg = pieces.setdefault((s["file_id"], s["line_no"]), Subgraph(key, label, s["rank"]))
        sg.info = {"piecewise_index": s["piecewise_index"], "total_pieces": s["total_pieces"],
                   "cudagraph_size": s["is_cudagraph_size"], "line_no": s["line_no"], "vllm_model": s["vllm_model"],
                   "compile_range": s["compile_range"], "submod_name": s["submod_name"]}
    regions: dict[tuple, Subgraph] = {}
    for a in arts:
        if a["subgraph_name"] is not None:
            sg = regions.setdefault((a["rank"], a["subgraph_name"]),
                                    Subgraph(("region", a["subgraph_name"]), a["subgraph_name"], a["rank"]))
        else:
            sg = pieces.get((a["file_id"], a["piece_line"]))
            if sg is None:
                continue   # its compile start was not stored (a file cut short before it)
        sg.artifacts.append(a)
        if a["compile_id"] and a["compile_id"] not in sg.compile_ids:
            sg.compile_ids.append(a["compile_id"])
    return list(pieces.values()) + list(regions.values())


def post_grad_passes(con, run_id: str) -> list[dict]:
    """vLLM's post-grad passes in log order: compile id, piece (its compile start's line), pass index
    and name, and whether the record is the pass's graph after it ran or its patterns."""
    return rows(con, "SELECT file_id, line_no, compile_id, rank, piece_line, pass_index, pass_name, name, size_bytes "
                     f"FROM artifacts WHERE {run_filter(con, run_id)} AND pass_name IS NOT NULL "
                     "ORDER BY file_id, line_no", [run_id])


def by_range(subgraphs: list[Subgraph]) -> list[tuple[str, list[Subgraph]]]:
    """vLLM's pieces grouped as tlparse's vLLM summary does: per model and compile range (in the order
    first compiled), the pieces compiled for it."""
    groups: dict[tuple, list[Subgraph]] = {}
    for sg in subgraphs:
        if sg.kind == "piece":
            groups.setdefault((sg.info["vllm_model"], sg.info["compile_range"]), []).append(sg)
    return [((f"model {m} · " if m else "") + (r or "no range"), items) for (m, r), items in groups.items()]


def match(a_list: list[Subgraph], b_list: list[Subgraph]) -> list[tuple[Subgraph, Subgraph]]:
    """Subgraphs of two runs paired by key: a piece by model, compile range and submodule, a region
    by its name; a key repeated on one side (another rank's) pairs in order."""
    by_b: dict[tuple, list[Subgraph]] = {}
    for sg in b_list:
        by_b.setdefault(sg.key, []).append(sg)
    pairs = []
    for sg in a_list:
        queue = by_b.get(sg.key)
        if queue:
            pairs.append((sg, queue.pop(0)))
    return pairs


def named_artifacts(con, run_id: str, compile_id: str | None) -> list[dict]:
    """(file_id, line_no, subgraph_name) of one compile id's artifacts that a regional subgraph names."""
    return rows(con, "SELECT file_id, line_no, subgraph_name FROM artifacts WHERE run_id = ? AND compile_id IS NOT DISTINCT "
                     "FROM ? AND subgraph_name IS NOT NULL ORDER BY file_id, line_no", [run_id, compile_id])
