"""A compiled callable's runtime linkage per run, in one place: what the compile-time page's exact
path (app/queries/compile_time.py) aggregates over the filtered runs, and what the day level of it
(store/day_rollups.py: rollup_day_linkage, rollup_day_linkage_bins) sums and bins per cell. Both
read these per-run figures, so the level and the exact path cannot drift apart.

Per run, callable and mode ('compiled' or 'marked'), from the rollups kept at ingest:
- calls, compile_steps: timed calls, and those that compiled (recompiles included);
- steady_ms: the steady call, run_metrics' step_time (which pools the run's ranks), else the step rollup's;
- compile_ms: the compiling calls' time; compile_cost_ms: that minus what those calls would have
  taken at steady speed (0 when it would not be positive);
- eager_ms: the run's eager reference: the bench's eager latency, else its one eager callable's steady call.
"""
from __future__ import annotations

# The per-run figures whose medians over runs the page shows (the level keeps their bins: store/sketch.py)
MEDIANS = ("steady_ms", "compile_ms", "compile_cost_ms", "eager_ms")


def per_run(runs: str) -> str:
    """CTEs (to follow a WITH and the relation ``runs``, which holds run_id) ending in ``linked``:
    run_id, callable, mode, calls, compile_steps and MEDIANS, one row per run of ``runs``, compiled
    callable and mode."""
    return f"""
    -- the steps kept per run, callable and mode at ingest (store/rollups.py: rollup_steps)
    lk_steps AS (SELECT s.* FROM rollup_steps s JOIN (SELECT run_id FROM {runs}) USING (run_id)),
    lk_eager_steps AS (
        SELECT run_id, any_value(steady_ms) AS eager_ms FROM lk_steps
        WHERE mode = 'eager' AND steady_calls > 0 GROUP BY run_id
        HAVING count(DISTINCT callable) = 1   -- two eager callables: which one is the reference is unknown
    ),
    lk_eager_bench AS (
        SELECT b.run_id, median(b.eager_latency_ms) AS eager_ms
        FROM bench_results b JOIN (SELECT run_id FROM {runs}) USING (run_id)
        WHERE b.eager_latency_ms > 0 GROUP BY b.run_id
    ),
    lk_steady AS (
        -- the review's figure for the callable's steady step (run_metrics.step_time), so both agree
        SELECT m.run_id, m.subject AS callable, m.value AS steady_ms
        FROM run_metrics m JOIN (SELECT run_id FROM {runs}) USING (run_id)
        WHERE m.metric = 'step_time'
    ),
    lk_per_run AS (
        SELECT p.run_id, p.callable, p.mode, p.calls, p.compile_steps, p.compile_ms,
               coalesce(st.steady_ms, p.steady_ms) AS steady_ms
        FROM lk_steps p LEFT JOIN lk_steady st USING (run_id, callable)
        WHERE p.mode IN ('compiled', 'marked')
    ),
    linked AS (
        SELECT p.run_id, p.callable, p.mode, p.calls, p.compile_steps, p.steady_ms, p.compile_ms,
               greatest(p.compile_ms - p.compile_steps * coalesce(p.steady_ms, 0), 0) AS compile_cost_ms,
               coalesce(eb.eager_ms, es.eager_ms) AS eager_ms
        FROM lk_per_run p LEFT JOIN lk_eager_bench eb USING (run_id) LEFT JOIN lk_eager_steps es USING (run_id)
    )"""
