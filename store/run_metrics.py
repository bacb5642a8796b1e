"""Per-run metrics, from every source, in one table (run_metrics, long form) that the pages, the
report and the gate all read.

Each metric's unit and direction (which way is better) is declared once, in METRICS; the SQL below
takes them from there. A run's rows are rebuilt inside the ingest transaction of each of its files
(so they never disagree with the events), on reingest, and for every stored run when migration 002
is applied. `subject` is a compiled callable or a benchmark ("model/task/mode"), '' for the run.

Which figure a metric is, when a run has several ranks: counts (graph_breaks, recompiles, ...) are
summed over ranks, as `summarize` counts them; compile times and the time to the first step are the
slowest rank's (what the job waited); step and iteration times pool the ranks' steady samples.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compilewatch.store.compile_time import PER_COMPILE
from compilewatch.store.run_filter import run_slices, runs_match, runs_param


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str          # x | ms | s | bytes | count | ratio
    direction: str     # higher | lower: which way is better
    source: str        # bench | hooks | logs | probe
    what: str


METRICS: tuple[Metric, ...] = (
    # from benchmark CSVs (subject: model/task/mode)
    Metric("speedup", "x", "higher", "bench", "eager median step / compiled median step"),
    Metric("compilation_latency", "s", "lower", "bench", "first compiled step, compilation included"),
    Metric("compression_ratio", "x", "higher", "bench", "eager peak memory / compiled peak memory"),
    Metric("latency", "ms", "lower", "bench", "compiled median step; spread is its IQR"),
    # from the timing hooks
    Metric("step_time", "ms", "lower", "hooks", "steady median call time of one compiled callable (subject); spread is the IQR"),
    Metric("iteration_time", "ms", "lower", "hooks", "steady median time between optimizer steps (else between calls of the outermost compiled callable): the training step a team feels"),
    Metric("hook_compile_time", "s", "lower", "hooks", "wall time of the calls that compiled, first calls and recompiles (slowest rank)"),
    Metric("time_to_first_step", "s", "lower", "hooks", "from the process's start to the end of its first optimizer step (else of the first call of the outermost compiled callable); slowest rank"),
    Metric("peak_memory", "bytes", "lower", "hooks", "device peak (CUDA max_memory_allocated) on GPUs, peak resident memory of the process on the CPU; subject 'heap in use': the CPU heap's bytes in use after the steady steps' forward; largest rank"),
    # from the manifest's host probe (collectors/host_probe.py)
    Metric("host_probe", "ms", "lower", "probe", "median of the host probe's times before and after the job (a fixed workload the job cannot change); spread is the difference between the two"),
    # from TORCH_TRACE / TORCH_LOGS
    Metric("graph_breaks", "count", "lower", "logs", "graph-break reports or records"),
    Metric("distinct_graph_breaks", "count", "lower", "logs", "distinct graph-break keys"),
    Metric("recompiles", "count", "lower", "logs", "compiles of a frame after its first"),
    Metric("limit_hits", "count", "lower", "logs", "cache / recompile limit hits"),
    Metric("failures", "count", "lower", "logs", "compiles that failed (fail_type set)"),
    Metric("compile_time", "s", "lower", "logs", "what the job waited for compiles, from the trace: each compile's forward, backward and runtime autotuning, summed (slowest rank)"),
    Metric("cache_hit_rate", "ratio", "higher", "logs", "compile cache hits / (hits + misses), all caches"),
    Metric("cudagraph_skips", "count", "lower", "logs", "CUDA-graph skip warnings (mode=reduce-overhead) in the job's log"),
    # CUDA-graph coverage (mode="reduce-overhead"), only for runs that used CUDA graphs at all
    Metric("cudagraph_graphs", "count", "higher", "logs", "CUDA graphs recorded: the trace's CUDAGraphNode.record spans, else the hooks' count (each input size and re-recording its own)"),
    Metric("cudagraph_partitions", "count", "lower", "hooks", "partitions of compiled graphs split around ops a CUDA graph cannot hold (torch's inductor.cudagraph_partitions; 0: none split)"),
    Metric("cudagraph_rerecords", "count", "lower", "logs", "warnings that a new CUDA graph is recorded for each distinct input size"),
    Metric("cudagraph_replay_share", "ratio", "higher", "hooks", "compiled calls that replayed a CUDA graph / compiled calls (the hooks)"),
)
BY_NAME = {m.name: m for m in METRICS}

# Each part yields (run_id, metric, subject, value, n, spread); {flt} is the run filter.
_PARTS = (
    """SELECT run_id, m.metric, concat_ws('/', model, task, mode), median(m.value), count(*),
              CASE WHEN m.metric = 'latency' THEN median(compiled_spread_ms) END
       FROM bench_results,
            LATERAL (VALUES ('speedup', speedup), ('compilation_latency', compilation_latency_s),
                            ('compression_ratio', compression_ratio), ('latency', abs_latency_ms)) m(metric, value)
       WHERE {flt} AND m.value IS NOT NULL
       GROUP BY run_id, m.metric, model, task, mode""",
    """SELECT run_id, 'step_time', callable, median(duration_ms), count(*),
              quantile_cont(duration_ms, 0.75) - quantile_cont(duration_ms, 0.25)
       FROM step_timings WHERE {flt} AND mode IN ('compiled', 'marked') AND phase = 'steady'
       GROUP BY run_id, callable""",
    """SELECT run_id, 'iteration_time', '', median(duration_ms), count(*),
              quantile_cont(duration_ms, 0.75) - quantile_cont(duration_ms, 0.25)
       FROM step_timings WHERE {flt} AND mode = 'iteration' AND phase = 'steady'
       GROUP BY run_id""",
    """SELECT run_id, 'hook_compile_time', '', max(s), count(*), NULL FROM (
           SELECT run_id, sum(duration_ms) / 1e3 AS s FROM step_timings
           WHERE {flt} AND mode = 'compiled' AND phase = 'compile' GROUP BY run_id, rank)
       GROUP BY run_id""",
    """SELECT run_id, 'peak_memory', '', max(b), count(*), NULL FROM (
           SELECT run_id, coalesce(peak_mem_bytes, peak_rss_bytes) AS b FROM timing_summaries WHERE {flt}
           UNION ALL
           SELECT run_id, peak_mem_bytes FROM step_timings WHERE {flt} AND peak_mem_bytes IS NOT NULL)
       WHERE b IS NOT NULL GROUP BY run_id""",
    """SELECT run_id, 'host_probe', '', median(median_ms), count(*), max(median_ms) - min(median_ms)
       FROM host_probes WHERE {flt} AND median_ms IS NOT NULL GROUP BY run_id""",
    # Log metrics only for runs that have a log with events (a bench-only run has no 0 graph breaks).
    """SELECT l.run_id, m.metric, '', m.value, m.n, NULL FROM (
           SELECT run_id FROM files WHERE {flt} AND kind IN ('torch_trace', 'torch_logs') GROUP BY run_id) l
       LEFT JOIN (SELECT run_id, count(*) AS n, count(DISTINCT coalesce(break_key, reason_norm, reason)) AS d
                  FROM graph_breaks WHERE {flt} GROUP BY run_id) gb USING (run_id)
       LEFT JOIN (SELECT run_id, count(*) AS n FROM recompiles WHERE {flt} GROUP BY run_id) rc USING (run_id)
       LEFT JOIN (SELECT run_id, count(*) AS n FROM limit_hits WHERE {flt} GROUP BY run_id) lh USING (run_id)
       LEFT JOIN (SELECT run_id, count(*) FILTER (fail_type IS NOT NULL) AS n FROM compiles WHERE {flt} GROUP BY run_id) cf USING (run_id)
       LEFT JOIN (SELECT run_id, count(*) AS n FROM cudagraph_events WHERE {flt} AND event = 'skip' GROUP BY run_id) cg USING (run_id),
       LATERAL (VALUES ('graph_breaks', coalesce(gb.n, 0), coalesce(gb.n, 0)),
                       ('distinct_graph_breaks', coalesce(gb.d, 0), coalesce(gb.n, 0)),
                       ('recompiles', coalesce(rc.n, 0), coalesce(rc.n, 0)),
                       ('limit_hits', coalesce(lh.n, 0), coalesce(lh.n, 0)),
                       ('failures', coalesce(cf.n, 0), coalesce(cf.n, 0)),
                       ('cudagraph_skips', coalesce(cg.n, 0), coalesce(cg.n, 0))) m(metric, value, n)""",
    # CUDA-graph coverage for the runs that recorded, skipped or split a CUDA graph; n of the
    # replay share is the compiled calls behind it
    """SELECT c.run_id, m.metric, '', m.value, m.n, NULL FROM (
           SELECT run_id, greatest(coalesce(p.recorded, 0), coalesce(t.recordings, 0)) AS graphs,
                  coalesce(t.partitions, 0) AS partitions, coalesce(e.rerecords, 0) AS rerecords,
                  t.replayed / nullif(t.watched_calls, 0) AS share, t.watched_calls
           FROM (SELECT run_id FROM compile_phases WHERE {flt} AND name = 'CUDAGraphNode.record' GROUP BY run_id
                 UNION SELECT run_id FROM cudagraph_events WHERE {flt} GROUP BY run_id
                 UNION SELECT run_id FROM timing_summaries
                       WHERE {flt} AND (cudagraph_skips > 0 OR cudagraph_partitions > 0 OR cudagraph_recordings > 0)
                       GROUP BY run_id) r
           LEFT JOIN (SELECT run_id, count(*) AS recorded FROM compile_phases
                      WHERE {flt} AND name = 'CUDAGraphNode.record' GROUP BY run_id) p USING (run_id)
           LEFT JOIN (SELECT run_id, sum(cudagraph_partitions) AS partitions, sum(cudagraph_recordings) AS recordings,
                             sum(replayed_calls) AS replayed,
                             sum(compiled_calls) FILTER (replayed_calls IS NOT NULL) AS watched_calls
                      FROM timing_summaries WHERE {flt} GROUP BY run_id) t USING (run_id)
           LEFT JOIN (SELECT run_id, count(*) FILTER (event = 're_record') AS rerecords FROM cudagraph_events
                      WHERE {flt} GROUP BY run_id) e USING (run_id)) c,
       LATERAL (VALUES ('cudagraph_graphs', c.graphs, c.graphs), ('cudagraph_partitions', c.partitions, c.partitions),
                       ('cudagraph_rerecords', c.rerecords, c.rerecords),
                       ('cudagraph_replay_share', c.share, c.watched_calls)) m(metric, value, n)
       WHERE m.value IS NOT NULL""",
    f"""SELECT run_id, 'compile_time', '', max(s), count(*), NULL FROM (
           SELECT run_id, sum(total_s) AS s FROM ({PER_COMPILE}) WHERE total_s IS NOT NULL GROUP BY run_id, rank)
       GROUP BY run_id""",
    # the first step's end from the process's start; the slowest rank's
    """SELECT run_id, 'time_to_first_step', '', max(time_to_first_step_s), count(*), NULL FROM timing_summaries
       WHERE {flt} AND time_to_first_step_s IS NOT NULL GROUP BY run_id""",
    """SELECT run_id, 'cache_hit_rate', '', count(*) FILTER (outcome = 'hit') / count(*), count(*), NULL
       FROM cache_events WHERE {flt} AND outcome IN ('hit', 'miss') GROUP BY run_id""",
)


# The CPU heap in use after the steady steps' forward (collectors/hooks.py says why beside the
# resident set), a subject of its own so it is only ever judged against the same figure. Its column
# comes with migration 025: the backfill of a store migrating through 023 runs before it exists.
_HEAP_PART = """SELECT run_id, 'peak_memory', 'heap in use', max(peak_heap_bytes), count(*), NULL
       FROM timing_summaries WHERE {flt} AND peak_heap_bytes IS NOT NULL GROUP BY run_id"""


def _sql(flt: str, heap: bool = True) -> str:
    defs = ", ".join("(" + ", ".join(f"${2 + 4 * i + k}" for k in range(4)) + ")" for i in range(len(METRICS)))
    parts = "\nUNION ALL\n".join(p.replace("{flt}", flt) for p in _PARTS + ((_HEAP_PART,) if heap else ()))
    return (f"INSERT INTO run_metrics (run_id, metric, subject, value, unit, direction, n, spread, source)\n"
            f"SELECT v.run_id, v.metric, v.subject, v.value, d.unit, d.direction, v.n, v.spread, d.source\n"
            f"FROM ({parts}) v(run_id, metric, subject, value, n, spread)\n"
            f"JOIN (VALUES {defs}) d(metric, unit, direction, source) USING (metric)")


def _params(run_ids):
    out = [runs_param(run_ids) if run_ids is not None else None]
    for m in METRICS:
        out += [m.name, m.unit, m.direction, m.source]
    return out


def refresh_run_metrics(con, run_ids: Sequence[str] | None = None, *, heap: bool = True) -> None:
    """Rebuild run_metrics for the runs ``run_ids``, or for every run when None. Runs inside the
    caller's transaction. ``heap=False``: for a store whose timing_summaries has no heap column yet
    (migration 023's backfill), where no row can hold a heap figure."""
    if run_ids is None:
        con.execute("DELETE FROM run_metrics").fetchall()
        # a slice of runs per statement (store/run_filter.py): the medians and quantiles of every
        # run's step timings at once were most of a team-year rebuild's spill to disk. $1 is unused
        # then, but keeps the numbering of the rest.
        for flt in run_slices(con):
            con.execute(_sql(f"($1 IS NULL AND {flt})", heap), _params(None)).fetchall()
    else:
        flt = runs_match(run_ids)
        con.execute(f"DELETE FROM run_metrics WHERE {flt}", [runs_param(run_ids)]).fetchall()
        con.execute(_sql(flt, heap), _params(run_ids)).fetchall()
