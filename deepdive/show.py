"""``compilewatch show RUN [COMPILE_ID] [--artifact NAME]`` as text: a run's compile ids, subgraphs
and stack trie; one compile id's metrics, failures, restarts and artifact list (by subgraph); or one
artifact's payload."""
from __future__ import annotations

import json

from compilewatch.core.errors import NotFoundError
from compilewatch.deepdive import artifacts, stack_trie, subgraphs
from compilewatch.deepdive.compiles import attempts, compile_ids, later_times


def _run(con, run_id: str) -> dict:
    rows = artifacts.rows(con, "SELECT run_id, model, label, torch_version FROM runs WHERE run_id = ?", [run_id])
    if not rows:
        raise NotFoundError(f"no run {run_id!r} in this store",
                            "pass a run id that `compilewatch ingest` printed, or open Run detail in the dashboard")
    return rows[0]


def _fmt_size(n) -> str:
    n = int(n or 0)
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def run_text(con, run_id: str) -> str:
    run = _run(con, run_id)
    ids = compile_ids(con, run_id)
    out = [f"run {run_id} · model {run['model'] or '?'} · torch {run['torch_version'] or '?'}"
           + (f" · label {run['label']}" if run["label"] else ""), ""]
    if ids:
        out.append("compile id   rank  artifacts  function (code)")
        for r in ids:
            flags = (" · recompile" if r["is_recompile"] else "") + (f" · failed: {r['fail_type']}" if r["fail_type"] else "")
            out.append(f"{r['compile_id'] or '-':<12} {'' if r['rank'] is None else r['rank']:<5} {r['artifacts']:>9}  "
                       f"{r['co_name'] or '?'} ({r['code'] or '?'}){flags}")
    else:
        out.append("no compiles recorded (a TORCH_TRACE carries them; TORCH_LOGS text does not)")
    out += _subgraphs_text(con, run_id)
    trie = stack_trie.build(con, run_id)
    if trie.children or trie.marks:
        out += ["", "stack trie (user frames leading to each compile):", stack_trie.render(trie)]
    loose = artifacts.list_artifacts(con, run_id, None)
    if loose:
        out += ["", f"{len(loose)} record(s) without a compile id (export, dumped files, versions): "
                    f"compilewatch show {run_id} -"]
    out += ["", f"details of one compile id: compilewatch show {run_id} COMPILE_ID"]
    return "\n".join(out)


def _subgraphs_text(con, run_id: str) -> list[str]:
    """vLLM's pieces by compile range, its post-grad passes, and regional subgraphs by compile id, as
    tlparse 0.4.8 groups them."""
    found = subgraphs.collect(con, run_id)
    out = []
    groups = subgraphs.by_range(found)
    if groups:
        out += ["", "vLLM piecewise compile, by compile range (piece · artifacts · post-grad passes):"]
        for rng, items in groups:
            out.append(f"  {rng}: {len(items)} piece(s)")
            for sg in items:
                extra = " · CUDA-graph capture size" if sg.info["cudagraph_size"] else ""
                total = sg.info["total_pieces"]
                out.append(f"    {sg.info['submod_name']} (piece {sg.info['piecewise_index']}"
                           f"{'' if total is None else f'; {total} piece compiles in all'}) · "
                           f"{len(sg.artifacts)} artifact(s) · {len(sg.passes)} pass(es){extra} · line {sg.info['line_no']}")
    passes = subgraphs.post_grad_passes(con, run_id)
    if passes:
        out += ["", "vLLM post-grad passes (log line · compile id · pass):"]
        for p in passes:
            what = f"#{p['pass_index']} {p['pass_name']}" if p["pass_index"] is not None else f"{p['pass_name']} patterns"
            out.append(f"  {p['line_no']:>7}  {p['compile_id'] or '-':<8} {what}")
    regions = [sg for sg in found if sg.kind == "region"]
    if regions:
        out += ["", "regional subgraphs (subgraph · compile ids · artifacts):"]
        for sg in regions:
            out.append(f"  {sg.label}  {', '.join(sg.compile_ids) or '-'}  "
                       + ", ".join(subgraphs.artifact_label(a) for a in sg.artifacts))
    return out


def _cid(compile_id):
    """'-' (tlparse's [-/-]) names the records that carry no compile id: export, dump_file, torch_version."""
    return None if compile_id in ("-", "-/-") else compile_id


def compile_text(con, run_id: str, compile_id: str, rank: int | None = None) -> str:
    _run(con, run_id)
    compile_id = _cid(compile_id)
    arts = [a for a in artifacts.list_artifacts(con, run_id, compile_id) if rank is None or a["rank"] == rank]
    metrics = attempts(con, run_id, compile_id, rank)
    if not arts and not metrics:
        known = ", ".join(r["compile_id"] or "-" for r in compile_ids(con, run_id)[:30])
        raise NotFoundError(f"run {run_id} has no compile id {compile_id!r}",
                            f"known compile ids: {known}" if known else "this run has no compile ids")
    out = [(f"compile {compile_id}" if compile_id else "records without a compile id") + f" of run {run_id}"
           + (f" (rank {rank})" if rank is not None else "")]
    last_of_rank = {m["rank"]: m for m in metrics}
    for m in metrics:
        out.append("")
        out.append(f"[{m['compile_id']}] {m['co_name'] or '?'} at {m['co_filename'] or '?'}:{m['co_firstlineno'] or '?'}"
                   + (f" · rank {m['rank']}" if m["rank"] is not None else ""))
        times = [(k, m[k]) for k in ("entire_frame_compile_time_s", "backend_compile_time_s",
                                      "inductor_compile_time_s", "code_gen_time_s") if m[k] is not None]
        if times:
            out.append("  times: " + ", ".join(f"{k[:-7]} {v:.3f} s" for k, v in times))
        counts = [(k, m[k]) for k in ("guard_count", "shape_env_guard_count", "graph_op_count", "graph_node_count",
                                       "graph_input_count", "cache_size") if m[k] is not None]
        if counts:
            out.append("  counts: " + ", ".join(f"{k} {v}" for k, v in counts))
        if m["recompile_reason"]:
            out.append(f"  recompile reason: {m['recompile_reason']}")
        if m["fail_type"]:
            where = (f" at {m['fail_user_frame_filename']}:{m['fail_user_frame_lineno']}"
                     if m["fail_user_frame_filename"] else "")
            out.append(f"  FAILED: {m['fail_type']}{where}")
            if m["fail_reason"]:
                out += ["    " + ln for ln in str(m["fail_reason"]).splitlines()]
        later = later_times(con, run_id, m["compile_id"], m["rank"])
        after = [(label, later[k]) for k, label in (("backward_s", "backward compile"),
                                                    ("runtime_autotune_s", "runtime autotuning"),
                                                    ("cudagraphify_s", "CUDA-graph recording"))
                 if later[k] is not None]
        if after and m is last_of_rank[m["rank"]]:   # a frame compile's last attempt: what came after it
            out.append("  after the forward: " + ", ".join(f"{label} {v:.3f} s" for label, v in after))
        restarts = _json_list(m["restart_reasons"])
        if restarts:
            out.append("  restarted because:")
            out += [f"    - {r}" for r in restarts]
    out += ["", "artifacts (log line · kind · size):"]
    # those of a named subgraph under its name, after the compile's own (tlparse groups them so)
    named = {(a["file_id"], a["line_no"]): a["subgraph_name"] for a in subgraphs.named_artifacts(con, run_id, compile_id)}
    for sub in [None, *dict.fromkeys(n for n in named.values())]:
        if sub is not None:
            out.append(f"  subgraph {sub}:")
        for a in arts:
            if named.get((a["file_id"], a["line_no"])) == sub:
                out.append(f"  {'  ' if sub else ''}{a['line_no']:>7}  {artifacts.title(a['kind'], a['name'])}"
                           f"  [{a['kind']}]  {_fmt_size(a['size_bytes'])}")
    if not arts:
        out.append("  none in the log for this compile id")
    out += ["", f"print one: compilewatch show {run_id} {compile_id or '-'} --artifact KIND_OR_NAME"]
    return "\n".join(out)


def _json_list(value) -> list[str]:
    if not value:
        return []
    try:
        v = json.loads(value)
    except (TypeError, ValueError):
        return [str(value)]
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def artifact_text(con, run_id: str, compile_id: str | None, what: str, rank: int | None = None) -> str:
    """The payload of the artifact of that compile id whose kind or name is ``what`` (the first in
    log order when several match), pretty-printed when it is JSON."""
    _run(con, run_id)
    compile_id = _cid(compile_id)
    matches = [a for a in artifacts.find(con, run_id, compile_id, what) if rank is None or a["rank"] == rank]
    if not matches:
        have = sorted({a["name"] or a["kind"] for a in artifacts.list_artifacts(con, run_id, compile_id)})
        raise NotFoundError(f"compile {compile_id} of run {run_id} has no artifact {what!r}",
                            "its artifacts: " + ", ".join(have) if have else "it has no artifacts")
    a = matches[0]
    return artifacts.fetch(con, run_id, a["file_id"], a["line_no"]).pretty()
