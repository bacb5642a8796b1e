"""One run (f.run_id): manifest, compiles, phases, breaks, recompiles, step times, errors, files."""
from __future__ import annotations

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import RUN_TIME, df, runs_cte
from compilewatch.store.compile_time import per_compile
from compilewatch.store.rollups import BREAK_KEY
from compilewatch.store.run_rows import run_filter


def runs_list(con, f: Filters) -> pd.DataFrame:
    """Filtered runs for the picker, newest first (500 at most), with event counts."""
    cte, params = runs_cte(f)
    sql = f"""
    WITH {cte}
    SELECT fr.run_id, fr.model, fr.label, fr.torch_version, fr.run_time
    FROM fr ORDER BY fr.run_time DESC NULLS LAST, fr.run_id LIMIT 500
    """
    return df(con, sql, params)


def _frame(con, sql: str, f: Filters, extra: list | None = None) -> pd.DataFrame:
    """``sql`` with ``{run}`` the run's rows of its one event table (store/run_rows.py)."""
    return df(con, sql.replace("{run}", run_filter(con, f.run_id)), [f.run_id] + (extra or []))


def manifest(con, f: Filters) -> pd.DataFrame:
    """The run's row of runs (manifest_json included) and its event counts: breaks, recompiles and
    limit hits from its totals row (store/rollups.py), compiles counted over its own rows of the
    compiles table (store/run_rows.py); a subquery per per-key rollup read all of each table."""
    return _frame(con, f"""
    SELECT r.*, {RUN_TIME} AS run_time,
           (SELECT count(*) FROM compiles WHERE {{run}}) AS compiles,
           coalesce(t.graph_breaks, 0)::BIGINT AS graph_breaks, coalesce(t.recompiles, 0)::BIGINT AS recompiles,
           coalesce(t.limit_hits, 0)::BIGINT AS limit_hits,
           (SELECT count(*) FROM ingest_errors WHERE run_id = r.run_id) AS ingest_errors
    FROM runs r LEFT JOIN rollup_run_totals t USING (run_id) WHERE r.run_id = ?""", f, [f.run_id])


def compiles(con, f: Filters) -> pd.DataFrame:
    """Compile ids in start order with their compilation metrics (2,000 at most): total_s (what the
    job waited: forward + backward + runtime autotuning, store/compile_time.py), the forward's
    entire_frame_compile_time_s and its phases, backward_s, runtime_autotune_s."""
    run = run_filter(con, f.run_id)
    return df(con, f"""
    SELECT compile_id, rank, co_name, co_filename || ':' || co_firstlineno AS code, total_s,
           entire_frame_compile_time_s, backend_compile_time_s, inductor_compile_time_s, code_gen_time_s,
           backward_s, runtime_autotune_s,
           guard_count, shape_env_guard_count, graph_op_count, graph_node_count, graph_input_count,
           cache_size, is_recompile, recompile_reason, fail_type, fail_reason,
           make_timestamp(CAST(start_time * 1e6 AS BIGINT)) AS started
    FROM ({per_compile(run)})
    ORDER BY start_time NULLS LAST, frame_id, frame_compile_id, attempt LIMIT 2000""", [f.run_id, f.run_id])


def compile_metrics(con, f: Filters) -> pd.DataFrame:
    """The full compilation_metrics JSON (every field that torch version logs) of f.compile_id in f.run_id."""
    return _frame(con, """
    SELECT compile_id, metrics_json FROM compiles WHERE {run} AND compile_id = ? LIMIT 1""",
                f, [f.compile_id])


def phases(con, f: Filters) -> pd.DataFrame:
    """Compile phases as intervals (ms since the first phase): compile_id, name, start_ms, end_ms,
    duration_ms. The 1,500 longest when there are more."""
    return _frame(con, """
    WITH p AS (SELECT compile_id, rank, name, start_us, duration_us FROM compile_phases
               WHERE {run} AND start_us IS NOT NULL ORDER BY duration_us DESC NULLS LAST LIMIT 1500),
    z AS (SELECT min(start_us) AS t0 FROM p)
    SELECT coalesce(compile_id, '-') AS compile_id, rank, name,
           (start_us - z.t0) / 1000.0 AS start_ms,
           (start_us - z.t0 + coalesce(duration_us, 0)) / 1000.0 AS end_ms,
           duration_us / 1000.0 AS duration_ms
    FROM p, z ORDER BY start_ms""", f)


def phase_totals(con, f: Filters) -> pd.DataFrame:
    """Total time per phase name across the run's compiles."""
    return _frame(con, """
    SELECT name, count(*) AS count, sum(duration_us) / 1e6 AS total_s, max(duration_us) / 1e6 AS max_s
    FROM compile_phases WHERE {run} GROUP BY name ORDER BY total_s DESC NULLS LAST LIMIT 100""", f)


def breaks(con, f: Filters) -> pd.DataFrame:
    """The run's graph breaks grouped by break_key (500 at most)."""
    return _frame(con, f"""
    SELECT {BREAK_KEY} AS break_key, count(*) AS occurrences, any_value(gb.gb_type) AS gb_type,
           any_value(coalesce(gb.reason_norm, gb.reason)) AS reason,
           any_value(gb.user_file || ':' || gb.user_line) AS location,
           string_agg(DISTINCT gb.compile_id, ', ' ORDER BY gb.compile_id) AS compile_ids,
           any_value(gb.explanation) AS explanation, any_value(gb.hints) AS hints,
           any_value(gb.user_stack) AS user_stack, min(gb.line_no) AS first_line, any_value(gb.gb_code) AS gb_code
    FROM graph_breaks gb WHERE {{run}}
    GROUP BY 1 ORDER BY occurrences DESC LIMIT 500""", f)


def recompiles(con, f: Filters) -> pd.DataFrame:
    """The run's recompiles in order with the first guard failure's category (1,000 at most)."""
    return _frame(con, """
    WITH g AS (SELECT file_id, recompile_no, arg_min(category, line_no) AS category,
                      arg_min(raw, line_no) AS guard
               FROM guard_failures WHERE {run} GROUP BY ALL)
    SELECT rc.recompile_no, rc.compile_id, rc.function, rc.file || ':' || rc.line AS location,
           make_timestamp(CAST(rc.ts * 1e6 AS BIGINT)) AS at, g.category, coalesce(g.guard, rc.reason) AS guard, rc.line_no
    FROM recompiles rc LEFT JOIN g USING (file_id, recompile_no)
    WHERE {run}
    ORDER BY rc.ts NULLS LAST, rc.file_id, rc.recompile_no LIMIT 1000""", f, [f.run_id])


def limit_hits(con, f: Filters) -> pd.DataFrame:
    return _frame(con, """
    SELECT compile_id, limit_name, limit_value, function, file || ':' || line AS location, reason
    FROM limit_hits WHERE {run} ORDER BY line_no LIMIT 200""", f)


def step_summary(con, f: Filters) -> pd.DataFrame:
    """Step times per callable, mode and phase: steps, median, p90, min, max (ms), peak memory."""
    return _frame(con, """
    SELECT callable, mode, phase, count(*) AS steps, median(duration_ms) AS median_ms,
           quantile_cont(duration_ms, 0.9) AS p90_ms, min(duration_ms) AS min_ms, max(duration_ms) AS max_ms,
           max(peak_mem_bytes) / 2^30 AS peak_mem_gib
    FROM step_timings WHERE {run}
    GROUP BY callable, mode, phase ORDER BY callable, mode,
        CASE phase WHEN 'compile' THEN 0 WHEN 'warmup' THEN 1 WHEN 'steady' THEN 2 ELSE 3 END LIMIT 200""", f)


def step_series(con, f: Filters) -> pd.DataFrame:
    """Step times for the chart: callable, mode, step, phase, duration_ms (5,000 points at most)."""
    return _frame(con, """
    SELECT callable, mode, step, phase, duration_ms FROM step_timings
    WHERE {run} ORDER BY step LIMIT 5000""", f)


def bench(con, f: Filters) -> pd.DataFrame:
    return _frame(con, """
    SELECT model, mode, task, device, batch_size, speedup, abs_latency_ms, eager_latency_ms,
           compilation_latency_s, compression_ratio, eager_peak_mem_gb, dynamo_peak_mem_gb,
           graph_breaks, unique_graphs, recompiles, accuracy
    FROM bench_results WHERE {run} ORDER BY model LIMIT 500""", f)


def errors_summary(con, f: Filters) -> pd.DataFrame:
    """Ingest errors per file and kind: count, first line, an example message."""
    return _frame(con, """
    SELECT original_name, kind, count(*) AS errors, min(line_no) AS first_line,
           any_value(message) AS example
    FROM ingest_errors WHERE {run} GROUP BY ALL ORDER BY errors DESC LIMIT 200""", f)


def errors(con, f: Filters) -> pd.DataFrame:
    return _frame(con, """
    SELECT original_name, line_no, kind, message, excerpt FROM ingest_errors
    WHERE {run} ORDER BY original_name, line_no LIMIT 500""", f)


def files(con, f: Filters) -> pd.DataFrame:
    """The run's ingested files: name, kind, status, size, records, errors, stored_path (under the store folder)."""
    return _frame(con, """
    SELECT file_id, original_name, kind, status, size_bytes, records, errors, parser_version,
           stored_path, sha256, ingested_at
    FROM files WHERE {run} ORDER BY file_id LIMIT 500""", f)


def cudagraph_events(con, f: Filters) -> pd.DataFrame:
    """The run's CUDA-graph skips (with their fix hint) and per-size re-recordings, grouped: how
    often each happened and where in the user's code."""
    from compilewatch.ingest.formats.cudagraphs import HINTS, OTHER_HINT
    d = _frame(con, """
    SELECT event, category, reason, user_file || ':' || user_line AS location, user_function, user_code,
           count(*) AS times, max(count) AS max_count, min(compile_id) AS compile_id
    FROM cudagraph_events WHERE {run} GROUP BY ALL ORDER BY event DESC, times DESC LIMIT 200""", f)
    d["hint"] = [HINTS.get(c, OTHER_HINT) for c in d["category"]]
    return d


def cudagraph_coverage(con, f: Filters) -> pd.DataFrame:
    """How much of the run ran under CUDA graphs: one row (none when the run never recorded,
    skipped or split one) of its coverage figures (store/run_metrics.py), torch's own skip count,
    the hooks' replays and compiled calls, and the coverage in words (review/cudagraph_coverage.py)."""
    from compilewatch.review.cudagraph_coverage import FIGURES, describe, run_coverages
    run = run_filter(con, f.run_id)
    d = df(con, f"""
    SELECT {", ".join(f"max(value) FILTER (metric = '{m}') AS {m}" for m in FIGURES)},
           (SELECT sum(cudagraph_skips) FROM timing_summaries WHERE {run}) AS skips_counted_by_torch,
           (SELECT sum(cudagraph_replays) FROM timing_summaries WHERE {run}) AS replays,
           (SELECT sum(compiled_calls) FROM timing_summaries WHERE {run}) AS compiled_calls
    FROM run_metrics WHERE run_id = ? AND subject = ''""", [f.run_id, f.run_id, f.run_id, f.run_id])
    cov = run_coverages(con, [f.run_id]).get(f.run_id)
    d = d.assign(replayed_pct=100 * d.pop("cudagraph_replay_share").astype(float))
    if cov is None:
        return d.iloc[0:0].assign(coverage=pd.Series(dtype=str))
    return d.assign(coverage=describe(cov))


def cache_layers(con, f: Filters) -> pd.DataFrame:
    """Per compile id and cache layer (FX graph, AOT autograd, ...): hits, misses, bypasses and the
    bypass reason; and the run's state: cold when every lookup missed."""
    return _frame(con, """
    SELECT coalesce(compile_id, '-') AS compile_id, cache, count(*) FILTER (outcome = 'hit') AS hits,
           count(*) FILTER (outcome = 'miss') AS misses, count(*) FILTER (outcome = 'bypass') AS bypasses,
           any_value(reason) FILTER (reason IS NOT NULL) AS bypass_reason
    FROM cache_events WHERE {run} GROUP BY ALL ORDER BY compile_id, cache""", f)


def cache_keys(con, f: Filters) -> pd.DataFrame:
    """The run's compile-cache lookups one by one: compile id, cache, which graph (FX graph lookups,
    review/cache_miss.py), outcome, the key, the bypass reason and how many key components torch
    logged for it."""
    from compilewatch.review.cache_miss import lookup_graphs
    d = _frame(con, """
    SELECT file_id, line_no, compile_id, rank, cache, outcome, cache_key, reason AS bypass_reason, components
    FROM cache_events WHERE {run} ORDER BY file_id, line_no LIMIT 2000""", f)
    graphs = lookup_graphs(con, f.run_id) if len(d) else {}
    d.insert(5, "graph", [graphs.get((fid, line)) for fid, line in zip(d["file_id"], d["line_no"])])
    return d.drop(columns=["file_id", "line_no"])


def run_before(con, f: Filters) -> pd.DataFrame:
    """One row, run_id: the run this run's cache lookups are explained against (review/cache_miss.py:
    the newest earlier run of the same model on the same hardware); no row when there is none."""
    from compilewatch.review.cache_miss import run_before as before_of
    before = before_of(con, f.run_id)
    return pd.DataFrame({"run_id": [before] if before else []})


def cache_misses_before(con, f: Filters) -> pd.DataFrame:
    """Why this run's cache lookups missed where the run before it (``run_before``) hit, or missed
    under another key: one row per such lookup."""
    from compilewatch.app.queries.compare import MISS_COLUMNS, misses_frame
    from compilewatch.review.cache_miss import run_before as before_of
    from compilewatch.review.cache_miss import why_missed
    before = before_of(con, f.run_id)
    return misses_frame(why_missed(con, before, f.run_id)) if before else pd.DataFrame(columns=MISS_COLUMNS)


def pieces(con, f: Filters) -> pd.DataFrame:
    """vLLM's piecewise compile, grouped as tlparse 0.4.8 shows it (deepdive/subgraphs.py): per
    compile range, each piece compiled for it with its artifacts and post-grad passes."""
    from compilewatch.deepdive import subgraphs
    out = []
    for rng, items in subgraphs.by_range(subgraphs.collect(con, f.run_id)):
        for sg in items:
            out.append({"compile_range": rng, "piece": sg.info["submod_name"], "index": sg.info["piecewise_index"],
                        "cudagraph_size": sg.info["cudagraph_size"], "artifacts": len(sg.artifacts),
                        "passes": ", ".join(f"#{a['pass_index']} {a['pass_name']}" for a in sg.passes),
                        "names": ", ".join(subgraphs.artifact_label(a) for a in sg.artifacts),
                        "line_no": sg.info["line_no"]})
    return pd.DataFrame(out, columns=["compile_range", "piece", "index", "cudagraph_size", "artifacts", "passes",
                                      "names", "line_no"])


def post_grad_passes(con, f: Filters) -> pd.DataFrame:
    """vLLM's post-grad passes in log order: compile id, pass index and name, graph or patterns."""
    from compilewatch.deepdive import subgraphs
    d = pd.DataFrame(subgraphs.post_grad_passes(con, f.run_id),
                     columns=["file_id", "line_no", "compile_id", "rank", "piece_line", "pass_index", "pass_name",
                              "name", "size_bytes"])
    d["record"] = ["graph after the pass" if pd.notna(i) else "patterns" for i in d["pass_index"]]
    return d


def regional_subgraphs(con, f: Filters) -> pd.DataFrame:
    """Regional compilation's named subgraphs: name, compile ids, artifacts (tlparse groups a compile
    id's artifacts by subgraph name)."""
    from compilewatch.deepdive import subgraphs
    rows = [{"subgraph_name": sg.label, "rank": sg.rank, "compile_ids": ", ".join(sg.compile_ids),
             "artifacts": len(sg.artifacts), "names": ", ".join(subgraphs.artifact_label(a) for a in sg.artifacts)}
            for sg in subgraphs.collect(con, f.run_id) if sg.kind == "region"]
    return pd.DataFrame(rows, columns=["subgraph_name", "rank", "compile_ids", "artifacts", "names"])
