"""Compile time across runs: which frames cost the most (recompiles included) and in which phase,
and per compiled callable what its steps cost against its compile (runtime linkage).

A compile's time is what the job waited for it (store/compile_time.py): its forward compile
(forward_s, entire_frame_compile_time_s), its backward compile (backward_s) and the runtime
autotuning of its first calls (runtime_autotune_s); total_s is their sum. The forward's phases come
from each compile's compilation_metrics, as torch times them:
- tracing   = entire_frame_compile_time_s - backend_compile_time_s (Dynamo bytecode tracing, guards)
- AOT       = backend_compile_time_s - inductor_compile_time_s (AOTAutograd: joint graph, partitioning)
- Inductor  = inductor_compile_time_s - autotuning (lowering, codegen, kernel compilation)
- autotuning = compiles.autotune_time_s (compile_time_autotune_time_us: Inductor's benchmark of
  kernel configs; 2.6+ log it)
- backward  = the lazy backward compile (bwd_compilation_metrics)
- runtime autotuning = Triton autotuning at the first calls (compilation_metrics_runtime)
A compile missing a field (older torch, a restart that never reached the backend) counts that
phase as 0, so a frame's phases never add up to more than its total.
"""
from __future__ import annotations

import pandas as pd

from compilewatch.app.cells import month_span, window_rows
from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df, runs_cte
from compilewatch.store import sketch
from compilewatch.store.compile_time import per_compile
from compilewatch.store.linkage import MEDIANS, per_run
from compilewatch.store.rollups import PHASE_EXPRS

PHASES = ("tracing", "AOT", "Inductor", "autotuning", "backward", "runtime autotuning")

_PHASE_SUMS = ",\n    ".join(f"sum({e}) AS {n}" for n, e in PHASE_EXPRS)

# Per run and frame of the filtered runs, from the rollup kept at ingest (store/rollups.py): a frame
# is its function, file base name and first line (paths differ across hosts and virtualenvs, base
# names and lines do not, as graph-break keys group breaks).
_FRAMES = """
cc AS (
    SELECT c.*, fr.model, fr.torch_version, 1 AS runs FROM rollup_compile_time c JOIN fr USING (run_id)
    WHERE c.co_name IS NOT NULL
)"""
# The same per cell and frame, from the day and month rollups (app/cells.py: window_rows): what a
# view over the whole window reads when its filters are all part of a cell. runs counts the cell's
# runs with the frame; a run lies in one cell, so runs add up across cells.
_CELL_FRAME_COLUMNS = ("model, torch_version, co_name, co_file, co_firstlineno, co_filename, runs, compiles, "
                       "recompiles, total_s, recompile_s, tracing_s, aot_s, inductor_s, autotune_s, cache_misses, "
                       "cache_miss_s, forward_s, backward_s, runtime_autotune_s")


def _cell_frames(f: Filters) -> tuple[str, list]:
    rows, params = window_rows("compile_time", f, _CELL_FRAME_COLUMNS)
    return f"cc AS (SELECT * FROM {rows} d WHERE d.co_name IS NOT NULL)", params


_DOMINANT = """CASE greatest(tracing_s, aot_s, inductor_s, autotune_s, backward_s, runtime_autotune_s)
        WHEN 0 THEN NULL WHEN tracing_s THEN 'tracing' WHEN aot_s THEN 'AOT'
        WHEN inductor_s THEN 'Inductor' WHEN autotune_s THEN 'autotuning' WHEN backward_s THEN 'backward'
        ELSE 'runtime autotuning' END"""


def frame_hotspots(con, f: Filters) -> pd.DataFrame:
    """One row per frame (co_name, file base name, first line; example_path one full path) over the filtered runs, most compile time
    first (f.limit rows; f.search narrows to frames whose function or file contains it): compiles,
    recompiles, runs, models, torch_versions, total_s (forward + backward + runtime autotuning),
    forward_s, recompile_s, tracing_s, aot_s, inductor_s, autotune_s (the forward's phases),
    backward_s, runtime_autotune_s, dominant (the phase with the most time), cache_misses (FX graph / AOTAutograd cache
    lookups that missed), cache_miss_s (compile time of the compiles that missed), share_pct (of all compile
    time in the filter)."""
    search = ""
    if f.search:
        # a search reads each run's full path of the frame, which the day rollups keep one of:
        # per-run rollups then
        cte, params = runs_cte(f)
        frames = f"{cte}, {_FRAMES}"
        search = "WHERE (co_name ILIKE ? OR co_filename ILIKE ?)"
        params = params + [f"%{f.search}%"] * 2
    else:
        frames, params = _cell_frames(f)
    sql = f"""
    WITH {frames},
    agg AS (
        SELECT co_name, co_file, co_firstlineno, any_value(co_filename) AS co_filename,
               sum(compiles)::BIGINT AS compiles, sum(recompiles)::BIGINT AS recompiles,
               sum(runs)::BIGINT AS runs,
               string_agg(DISTINCT model, ', ' ORDER BY model) AS models,
               string_agg(DISTINCT torch_version, ', ' ORDER BY torch_version) AS torch_versions,
               coalesce(sum(total_s), 0) AS total_s, sum(recompile_s) AS recompile_s,
               sum(tracing_s) AS tracing_s, sum(aot_s) AS aot_s, sum(inductor_s) AS inductor_s,
               sum(autotune_s) AS autotune_s, sum(cache_misses)::BIGINT AS cache_misses,
               sum(cache_miss_s) AS cache_miss_s, coalesce(sum(forward_s), 0) AS forward_s,
               coalesce(sum(backward_s), 0) AS backward_s, coalesce(sum(runtime_autotune_s), 0) AS runtime_autotune_s
        FROM cc
        {search}
        GROUP BY ALL
    )
    SELECT co_name, co_file || ':' || co_firstlineno AS code, total_s,
           100 * total_s / nullif(sum(total_s) OVER (), 0) AS share_pct, {_DOMINANT} AS dominant,
           forward_s, tracing_s, aot_s, inductor_s, autotune_s, backward_s, runtime_autotune_s, compiles, recompiles,
           coalesce(recompile_s, 0) AS recompile_s, cache_misses, cache_miss_s, runs, models, torch_versions,
           co_filename AS example_path
    FROM agg ORDER BY total_s DESC, compiles DESC, co_name LIMIT ?"""
    return df(con, sql, params + [f.limit])


def frame_key(co_name: str, code: str) -> str:
    """The Filters.frame value of a frame_hotspots row: "co_name @ file:line"."""
    return f"{co_name} @ {code}"


def _parse_frame(frame: str | None) -> tuple[str, str, int] | None:
    try:
        co_name, code = frame.rsplit(" @ ", 1)
        file, line = code.rsplit(":", 1)
        return co_name, file, int(line)
    except (AttributeError, ValueError):
        return None


def frame_runs(con, f: Filters) -> pd.DataFrame:
    """The runs that compiled frame f.frame ("co_name @ file:line"), costliest first (f.limit rows):
    run_id, model, label, torch_version, run_time, compiles, recompiles, total_s, forward_s and the
    phases.
    Empty for a frame that does not parse."""
    key = _parse_frame(f.frame)
    cols = ["run_id", "model", "label", "torch_version", "run_time", "compiles", "recompiles", "total_s",
            "forward_s", "tracing_s", "aot_s", "inductor_s", "autotune_s", "backward_s", "runtime_autotune_s"]
    if key is None:
        return pd.DataFrame(columns=cols)
    cte, params = runs_cte(f)
    sql = f"""
    WITH {cte}
    SELECT c.run_id, any_value(r.model) AS model, any_value(r.label) AS label,
           any_value(r.torch_version) AS torch_version, any_value(fr.run_time) AS run_time,
           count(*) AS compiles, count(*) FILTER (WHERE c.is_recompile) AS recompiles,
           sum(coalesce(c.total_s, 0)) AS total_s, sum(coalesce(c.forward_s, 0)) AS forward_s, {_PHASE_SUMS},
           sum(c.backward_s) AS backward_s, sum(c.runtime_autotune_s) AS runtime_autotune_s
    FROM ({per_compile("run_id IN (SELECT run_id FROM fr)")}) c JOIN fr USING (run_id) JOIN runs r USING (run_id)
    WHERE c.co_name = ? AND c.co_firstlineno = ? AND regexp_extract(c.co_filename, '[^/\\\\]*$') = ?
    GROUP BY c.run_id ORDER BY total_s DESC, c.run_id LIMIT ?"""
    return df(con, sql, params + [key[0], key[2], key[1], f.limit])


def phase_split(con, f: Filters) -> pd.DataFrame:
    """Compile seconds per torch version and phase (long form: torch_version, phase, seconds,
    compiles), for the stacked bars: which phase dominates, and whether a version moved it. Read
    from the day and month rollups: every filter it takes is part of a cell."""
    frames, params = _cell_frames(f)
    sql = f"""
    WITH {frames},
    v AS (SELECT coalesce(torch_version, 'unknown') AS torch_version, sum(compiles)::BIGINT AS compiles,
                 sum(tracing_s) AS tracing, sum(aot_s) AS "AOT", sum(inductor_s) AS "Inductor",
                 sum(autotune_s) AS autotuning, sum(backward_s) AS backward,
                 sum(runtime_autotune_s) AS "runtime autotuning" FROM cc GROUP BY 1)
    UNPIVOT v ON tracing, "AOT", "Inductor", autotuning, backward, "runtime autotuning" INTO NAME phase VALUE seconds
    ORDER BY torch_version, phase"""
    return df(con, sql, params)


def frame_versions(con, f: Filters, top: int = 10) -> pd.DataFrame:
    """The `top` costliest frames' compile seconds per torch version (frame, torch_version,
    total_s, compiles, recompiles): one frame across versions. Read from the day and month rollups."""
    frames, params = _cell_frames(f)
    sql = f"""
    WITH {frames},
    topf AS (SELECT co_name, co_file, co_firstlineno FROM cc GROUP BY ALL
             ORDER BY coalesce(sum(total_s), 0) DESC LIMIT ?)
    SELECT co_name || ' (' || co_file || ':' || co_firstlineno || ')' AS frame,
           coalesce(torch_version, 'unknown') AS torch_version, coalesce(sum(total_s), 0) AS total_s,
           sum(compiles)::BIGINT AS compiles, sum(recompiles)::BIGINT AS recompiles
    FROM cc JOIN topf USING (co_name, co_file, co_firstlineno)
    GROUP BY ALL ORDER BY frame, torch_version"""
    return df(con, sql, params + [top])


# How far a median the linkage reads from its level may lie from the exact one (relative)
LINKAGE_MEDIAN_ERROR = sketch.ALPHA
# The linkage's keys, and what a view shows from its medians, on either path
_LINKAGE_KEYS = "model, callable, mode, torch_version"
_LINKAGE_SHOWN = """
    SELECT *, eager_ms - steady_ms AS saved_ms,
           CASE WHEN eager_ms > steady_ms THEN ceil(compile_cost_ms / (eager_ms - steady_ms)) END AS break_even_steps
    FROM agg ORDER BY compile_cost_ms DESC NULLS LAST, model, callable LIMIT ?"""


def runtime_linkage(con, f: Filters) -> pd.DataFrame:
    """Per compiled callable and mode (model, callable, mode, torch version) over the filtered runs'
    timing hooks: runs, calls (timed calls), compile_steps (calls that compiled, recompiles included),
    and the medians over runs of steady_ms (steady call: run_metrics' step_time, which pools a run's
    ranks), compile_ms (time of the compiling calls), compile_cost_ms (compile_ms minus what those
    calls would have taken at steady speed) and eager_ms (steady call of the same runs' eager
    reference: the bench's eager latency, else an eager-mode callable); saved_ms (eager_ms -
    steady_ms) and break_even_steps (steady calls until the compile paid for itself; null when there
    is no eager baseline or compiling made the call slower). Costliest compile first, f.limit rows.

    A window holding a whole month, without a label filter (app/cells.py: month_span), is read from
    the linkage's day and month level: the counts exact, the medians within store/sketch.py's ALPHA.
    Any other view, whose runs are few, from each run's figures, exactly."""
    read = linkage_per_cell if month_span(f) is not None else linkage_per_run
    return read(con, f)


def linkage_per_run(con, f: Filters) -> pd.DataFrame:
    """runtime_linkage from each filtered run's figures (store/linkage.py): exact, and read per run."""
    cte, params = runs_cte(f)
    sql = f"""
    WITH {cte}, {per_run("fr")},
    agg AS (
        SELECT fr.model, l.callable, l.mode, fr.torch_version, count(*) AS runs, sum(l.calls)::BIGINT AS calls,
               sum(l.compile_steps)::BIGINT AS compile_steps, {", ".join(f"median(l.{k}) AS {k}" for k in MEDIANS)}
        FROM linked l JOIN fr USING (run_id) GROUP BY ALL
    )
    {_LINKAGE_SHOWN}"""
    return df(con, sql, params + [f.limit])


def linkage_per_cell(con, f: Filters) -> pd.DataFrame:
    """runtime_linkage from the day and month level (app/cells.py: window_rows): the cells' sums
    added, and each median read from the cells' bins merged (store/sketch.py)."""
    sums, sum_params = window_rows("linkage", f, f"{_LINKAGE_KEYS}, runs, calls, compile_steps")
    bins, bin_params = window_rows("linkage_bins", f, f"{_LINKAGE_KEYS}, metric, sign, bin, n")
    same_key = " AND ".join(f"s.{k} IS NOT DISTINCT FROM m.{k}" for k in _LINKAGE_KEYS.split(", "))
    sql = f"""
    WITH sums AS (
        SELECT {_LINKAGE_KEYS}, sum(runs)::BIGINT AS runs, sum(calls)::BIGINT AS calls,
               sum(compile_steps)::BIGINT AS compile_steps
        FROM {sums} GROUP BY {_LINKAGE_KEYS}
    ),
    medians AS (
        SELECT {_LINKAGE_KEYS}, {", ".join(f"any_value(value) FILTER (WHERE metric = '{k}') AS {k}" for k in MEDIANS)}
        FROM ({sketch.medians(bins, _LINKAGE_KEYS)}) GROUP BY {_LINKAGE_KEYS}
    ),
    agg AS (
        SELECT s.*, {", ".join(f"m.{k}" for k in MEDIANS)} FROM sums s LEFT JOIN medians m ON {same_key}
    )
    {_LINKAGE_SHOWN}"""
    return df(con, sql, sum_params + bin_params + [f.limit])
