"""What a compile's time counts, in one place: the run metric compile_time (store/run_metrics.py),
the compile-time rollups (store/rollups.py) and the pages that read a run's compiles all take it
from here.

A compile id's time is what the job waited for it:
- forward_s: the frame's compile (compilation_metrics.entire_frame_compile_time_s: Dynamo, AOTAutograd
  and Inductor on the forward graph, and a backward compiled eagerly with it);
- backward_s: the backward compile AOTAutograd runs at the first backward call
  (later_compile_metrics; where a backward has both the older aot_autograd_backward record and
  bwd_compilation_metrics, the older one holds the whole compile and is the one counted);
- runtime_autotune_s: Triton autotuning at the first calls of the forward and the backward.
total_s is their sum; null for a compile that logged none of them.
"""
from __future__ import annotations

# a frame compile's backward and runtime seconds, per file, rank and frame compile; {flt} picks runs
_LATER = """
    SELECT run_id, file_id, rank, compiled_autograd_id, frame_id, frame_compile_id,
           any_value(compile_id) AS compile_id,
           coalesce(sum(backward_compile_time_s) FILTER (WHERE event = 'aot_autograd_backward_compilation_metrics'),
                    sum(backward_compile_time_s) FILTER (WHERE event = 'bwd_compilation_metrics')) AS backward_s,
           sum(runtime_autotune_time_s) AS runtime_autotune_s
    FROM later_compile_metrics WHERE {flt}
    GROUP BY run_id, file_id, rank, compiled_autograd_id, frame_id, frame_compile_id"""

# Every compiles row of the runs {flt} picks, with forward_s, backward_s, runtime_autotune_s,
# total_s and has_forward. A frame compile's later records join the last compiles row of its key
# (one per frame compile, unless a file holds two sessions that reuse ids); records whose compile
# logged no compilation_metrics (a job killed between them) are rows of their own, with a null
# co_name: they count in the run's compile time, in no frame's.
PER_COMPILE = f"""
    SELECT c.* EXCLUDE (nth) REPLACE (coalesce(c.run_id, l.run_id) AS run_id, coalesce(c.file_id, l.file_id) AS file_id,
                                      coalesce(c.rank, l.rank) AS rank, coalesce(c.compile_id, l.compile_id) AS compile_id),
           c.run_id IS NOT NULL AS has_forward,
           c.entire_frame_compile_time_s AS forward_s,
           coalesce(l.backward_s, 0) AS backward_s,
           coalesce(l.runtime_autotune_s, 0) AS runtime_autotune_s,
           CASE WHEN c.entire_frame_compile_time_s IS NOT NULL OR l.backward_s IS NOT NULL
                     OR l.runtime_autotune_s IS NOT NULL
                THEN coalesce(c.entire_frame_compile_time_s, 0) + coalesce(l.backward_s, 0)
                     + coalesce(l.runtime_autotune_s, 0) END AS total_s
    FROM (SELECT *, row_number() OVER (PARTITION BY file_id, rank, compiled_autograd_id, frame_id, frame_compile_id
                                       ORDER BY line_no DESC) AS nth
          FROM compiles WHERE {{flt}}) c
    FULL JOIN ({_LATER}) l
      ON c.nth = 1 AND c.file_id = l.file_id AND c.frame_id = l.frame_id AND c.frame_compile_id = l.frame_compile_id
         AND c.rank IS NOT DISTINCT FROM l.rank AND c.compiled_autograd_id IS NOT DISTINCT FROM l.compiled_autograd_id"""


def per_compile(flt: str) -> str:
    """PER_COMPILE for the runs the SQL condition ``flt`` picks (it may use the caller's parameters)."""
    return PER_COMPILE.replace("{flt}", flt)
