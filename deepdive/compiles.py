"""A run's compile ids, and one compile id's attempts: what `compilewatch show` prints and Run
detail's deep dive shows, read once here.

A compile id names a frame's compile; its attempts (a restart after a graph break, tlparse's
``0/0_1``) carry the id with an ``_N`` suffix and are listed with it.
"""
from __future__ import annotations

from compilewatch.deepdive.artifacts import rows
from compilewatch.store.run_rows import run_filter

_ATTEMPT_COLUMNS = ("compile_id, rank, co_name, co_filename, co_firstlineno, entire_frame_compile_time_s, "
                    "backend_compile_time_s, inductor_compile_time_s, code_gen_time_s, guard_count, "
                    "shape_env_guard_count, graph_op_count, graph_node_count, graph_input_count, cache_size, "
                    "fail_type, fail_reason, fail_user_frame_filename, fail_user_frame_lineno, restart_reasons, "
                    "recompile_reason, is_recompile")


def compile_ids(con, run_id: str) -> list[dict]:
    """Every compile id of the run (from compiles and artifacts), with its artifact count."""
    run = run_filter(con, run_id)
    return rows(con, f"""
    WITH a AS (SELECT compile_id, rank, count(*) FILTER (WHERE kind <> 'dynamo_start') AS artifacts
               FROM artifacts WHERE {run} AND compile_id IS NOT NULL GROUP BY ALL),
    c AS (SELECT compile_id, rank, any_value(co_name) AS co_name,
                 any_value(co_filename || ':' || co_firstlineno) AS code, bool_or(is_recompile) AS is_recompile,
                 any_value(fail_type) AS fail_type, min(line_no) AS line_no
          FROM compiles WHERE {run} GROUP BY ALL)
    SELECT coalesce(c.compile_id, a.compile_id) AS compile_id, coalesce(c.rank, a.rank) AS rank, c.co_name, c.code,
           c.is_recompile, c.fail_type, coalesce(a.artifacts, 0) AS artifacts
    FROM c FULL JOIN a ON a.compile_id = c.compile_id AND a.rank IS NOT DISTINCT FROM c.rank
    ORDER BY c.line_no NULLS LAST, compile_id""", [run_id, run_id])


def attempts(con, run_id: str, compile_id: str | None, rank: int | None = None) -> list[dict]:
    """Each attempt of `compile_id` (of one rank, when given) in log order: its code, times,
    counts, failure, restart and recompile reasons."""
    return rows(con, f"""
    SELECT {_ATTEMPT_COLUMNS}
    FROM compiles WHERE run_id = ? AND (compile_id = ? OR regexp_replace(compile_id, '_\\d+$', '') = ?)
      AND (? IS NULL OR rank = ?)
    ORDER BY line_no""", [run_id, compile_id, compile_id, rank, rank])


def later_times(con, run_id: str, compile_id: str | None, rank: int | None = None) -> dict:
    """What `compile_id`'s frame compile cost after its forward (store/compile_time.py), summed over
    its records (of one rank, when given): backward_s, runtime_autotune_s and cudagraphify_s, each
    None when no record said."""
    frame_compile = None if compile_id is None else compile_id.split("_")[0]
    (row,) = rows(con, """
    SELECT sum(backward_compile_time_s) AS backward_s, sum(runtime_autotune_time_s) AS runtime_autotune_s,
           sum(runtime_cudagraphify_time_s) AS cudagraphify_s
    FROM later_compile_metrics WHERE run_id = ? AND compile_id = ? AND (? IS NULL OR rank = ?)""",
                  [run_id, frame_compile, rank, rank])
    return row


def restarted(restart_reasons) -> bool:
    return restart_reasons is not None and restart_reasons not in ("[]", "")


def failures(con, run_id: str, compile_id: str | None) -> list[dict]:
    """The attempts of `compile_id` that failed or restarted: compile_id, rank, fail_type,
    fail_reason, fail_at (user file:line), restart_reasons."""
    out = []
    for a in attempts(con, run_id, compile_id):
        if a["fail_type"] is None and not restarted(a["restart_reasons"]):
            continue
        file, line = a["fail_user_frame_filename"], a["fail_user_frame_lineno"]
        out.append({"compile_id": a["compile_id"], "rank": a["rank"], "fail_type": a["fail_type"],
                    "fail_reason": a["fail_reason"],
                    "fail_at": f"{file}:{line}" if file is not None and line is not None else None,
                    "restart_reasons": a["restart_reasons"]})
    return out
