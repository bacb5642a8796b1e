"""Graph-break hotspots: breaks grouped by break_key across the filtered runs, read from the day and
month rollups kept at ingest (store/day_rollups.py, store/month_rollups.py: per day or month cell and
key); the raw graph_breaks only for one key."""
from __future__ import annotations

from datetime import date, datetime, time, timedelta

import pandas as pd

from compilewatch.app.cells import cell_where, window_rows
from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df, runs_cte
from compilewatch.store.rollups import BREAK_KEY


def new_since(f: Filters) -> datetime:
    """A break is "new this week" when first seen (ever) in the 7 days ending at the window's end."""
    end = f.end or date.today()
    return datetime.combine(end - timedelta(days=6), time.min)


_BREAK_COLUMNS = ("break_key, n, runs, model, first_seen, last_seen, torch_version, gb_type, gb_code, reason, "
                  "explanation, hints, user_file, user_line, user_function, example_stack, stack_seen")


def hotspots(con, f: Filters) -> pd.DataFrame:
    """One row per break_key: occurrences, runs, models, first/last seen, torch versions,
    explanation, hints, an example user stack, new_this_week. Most frequent first, f.limit rows;
    f.search narrows to breaks whose type, reason or file contains it, f.only_new to new ones.
    Read from the rollups (app/cells.py: window_rows): every filter it takes is part of a cell, and
    a run lies in one cell, so runs add up and the latest reason is the latest cell's."""
    rows, params = window_rows("graph_breaks", f, _BREAK_COLUMNS)
    sql = f"""
    WITH agg AS (
        SELECT break_key,
               sum(n)::BIGINT AS occurrences,
               sum(runs)::BIGINT AS runs,
               count(DISTINCT model) AS models,
               min(first_seen) AS first_seen,
               max(last_seen) AS last_seen,
               string_agg(DISTINCT torch_version, ', ' ORDER BY torch_version) AS torch_versions,
               string_agg(DISTINCT model, ', ' ORDER BY model) AS model_list,
               any_value(gb_type) AS gb_type,
               any_value(gb_code) AS gb_code,
               arg_max(reason, last_seen) AS reason,
               any_value(explanation) AS explanation,
               any_value(hints) AS hints,
               any_value(user_file) AS user_file,
               any_value(user_line) AS user_line,
               any_value(user_function) AS user_function,
               arg_max(example_stack, stack_seen) FILTER (WHERE example_stack IS NOT NULL) AS example_stack
        FROM {rows} d GROUP BY break_key
    ),
    ever AS (
        -- every key, not just agg's: the LEFT JOIN below keeps only agg's rows anyway
        SELECT break_key, min(first_seen) AS first_seen_ever FROM rollup_month_graph_breaks GROUP BY 1
    )
    SELECT agg.*, ever.first_seen_ever, ever.first_seen_ever >= ? AS new_this_week
    FROM agg LEFT JOIN ever USING (break_key)
    WHERE (NOT ? OR ever.first_seen_ever >= ?)
      -- searched on the aggregated breaks (hundreds), not on every occurrence (millions)
      AND (?::VARCHAR IS NULL OR concat_ws(' ', agg.break_key, agg.gb_type, agg.gb_code, agg.reason, agg.user_file,
                                          agg.user_function) ILIKE '%' || ? || '%')
    ORDER BY occurrences DESC, break_key
    LIMIT ?
    """
    since = new_since(f)
    return df(con, sql, params + [since, bool(f.only_new), since, f.search, f.search, int(f.limit)])


def hotspot_trend(con, f: Filters, top: int = 8) -> pd.DataFrame:
    """Occurrences per week (day when the window is shorter than 3 weeks) for the top breaks; the
    rest summed as "other". Columns: period, break_key, label, occurrences. The top breaks are
    ranked on the day and month rollups (app/cells.py: window_rows); only their own day rows are
    summed per period, and "other" is the period's total (each run's totals row, placed by its day
    cell) less theirs: a year's trend reads eight keys' rows, not every key's."""
    rows, params = window_rows("graph_breaks", f, "break_key, gb_type, n")
    where, day_params = cell_where(f)
    grain = "day" if f.window_days() <= 21 and f.start else "week"
    sql = f"""
    WITH topk AS (SELECT break_key, any_value(gb_type) AS gb_type FROM {rows} d
                  GROUP BY 1 ORDER BY sum(n) DESC, 1 LIMIT ?),
    g AS (SELECT date_trunc('{grain}', d.day::TIMESTAMP) AS period, d.break_key, sum(d.n)::BIGINT AS n
          FROM rollup_day_graph_breaks d WHERE {where} AND d.break_key IN (SELECT break_key FROM topk)
          GROUP BY ALL),
    total AS (SELECT date_trunc('{grain}', d.day::TIMESTAMP) AS period, sum(t.graph_breaks)::BIGINT AS n
              FROM rollup_day_runs d JOIN rollup_run_totals t USING (run_id) WHERE {where} GROUP BY 1),
    other AS (SELECT total.period, total.n - coalesce((SELECT sum(g.n) FROM g WHERE g.period = total.period), 0) AS n
              FROM total)
    SELECT g.period, g.break_key, left(coalesce(topk.gb_type, topk.break_key), 60) AS label, g.n AS occurrences
    FROM g JOIN topk USING (break_key)
    UNION ALL
    SELECT period, 'other', 'other breaks', n FROM other WHERE n > 0
    ORDER BY period, occurrences DESC
    """
    return df(con, sql, params + [top] + day_params + day_params)


def hotspot_runs(con, f: Filters) -> pd.DataFrame:
    """The runs where f.break_key occurred: newest first, with counts and an example compile_id.
    The runs and counts come from the per-run rollup; the compile ids from those runs' rows alone,
    bounded by their file ids (store/run_rows.py says why that skips the rest of the table)."""
    cols = ["run_id", "model", "torch_version", "label", "run_time", "occurrences", "compile_ids"]
    if not f.break_key:
        return pd.DataFrame(columns=cols)
    cte, params = runs_cte(f)
    runs = df(con, f"""
    WITH {cte}
    SELECT fr.run_id, fr.model, fr.torch_version, fr.label, fr.run_time, rg.n AS occurrences,
           (SELECT min(file_id) FROM files WHERE run_id = fr.run_id) AS lo,
           (SELECT max(file_id) FROM files WHERE run_id = fr.run_id) AS hi
    FROM rollup_graph_breaks rg JOIN fr USING (run_id)
    WHERE rg.break_key = ?
    ORDER BY fr.run_time DESC LIMIT 200""", params + [f.break_key])
    if runs.empty or runs["lo"].isna().all():
        return runs.assign(compile_ids=None)[cols]
    lo, hi = int(runs["lo"].min()), int(runs["hi"].max())
    ids = df(con, f"""
    SELECT gb.run_id, string_agg(DISTINCT gb.compile_id, ', ' ORDER BY gb.compile_id) AS compile_ids
    FROM graph_breaks gb
    WHERE gb.file_id BETWEEN {lo} AND {hi} AND list_contains(?::VARCHAR[], gb.run_id) AND {BREAK_KEY} = ?
    GROUP BY 1""", [list(runs["run_id"]), f.break_key])
    return runs.merge(ids, on="run_id", how="left")[cols]


def cudagraph_skips(con, f: Filters) -> pd.DataFrame:
    """CUDA-graph skips across the filtered runs: per category and place in user code, the skips,
    runs and models, torch's reason and the fix hint."""
    from compilewatch.ingest.formats.cudagraphs import HINTS, OTHER_HINT
    cte, params = runs_cte(f)
    d = df(con, f"""
    WITH {cte}
    SELECT e.category, any_value(e.reason) AS reason,
           regexp_extract(e.user_file, '[^/\\\\]+$') || ':' || e.user_line AS location,
           any_value(e.user_code) AS user_code, count(*) AS skips, count(DISTINCT e.run_id) AS runs,
           count(DISTINCT fr.model) AS models
    FROM cudagraph_events e JOIN fr USING (run_id) WHERE e.event = 'skip'
    GROUP BY ALL ORDER BY skips DESC LIMIT 50""", params)
    d["hint"] = [HINTS.get(c, OTHER_HINT) for c in d["category"]]
    return d
