"""CUDA-graph coverage over time (the Trends page): per run of the filtered runs that recorded,
skipped or split a CUDA graph, its coverage figures from run_metrics and the coverage in words."""
from __future__ import annotations

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df, per_hardware, runs_cte
from compilewatch.review.cudagraph_coverage import FIGURES, Coverage, describe

MAX_RUNS = 500


def coverage_trend(con, f: Filters) -> pd.DataFrame:
    """Newest first, at most MAX_RUNS runs: model (with its hardware where the runs span several),
    run time, torch version, label, git commit, the figures of review/cudagraph_coverage.FIGURES
    (the replayed share in percent) and the coverage in words.

    A run is in coverage when it used CUDA graphs: any figure but cudagraph_skips, which is written
    for every logged run, or some skips. Those runs are picked from their metric rows first, and
    only the newest MAX_RUNS of them are pivoted: grouping every run of the window to find the few
    that used CUDA graphs took 0.16 s of CPU over a year of 100,000 runs, this 0.08 s. What is left
    still grows with the runs: the scan of their metric rows (benchmarks/bench_trends.py)."""
    cte, params = runs_cte(f)
    used = ", ".join(f"'{name}'" for name in FIGURES if name != "cudagraph_skips")
    pivot = ", ".join(f"max(m.value) FILTER (m.metric = '{name}') AS {name}" for name in FIGURES)
    d = df(con, f"""
    WITH {cte},
    covered AS (SELECT * FROM fr WHERE run_id IN (
                    SELECT run_id FROM run_metrics WHERE subject = ''
                    AND (metric IN ({used}) OR metric = 'cudagraph_skips' AND value > 0))),
    newest AS (SELECT * FROM covered ORDER BY run_time DESC LIMIT {MAX_RUNS}),
    cov AS (SELECT n.run_id, n.model, n.hardware, n.run_time, n.torch_version, n.label, n.git_commit, {pivot}
            FROM run_metrics m JOIN newest n USING (run_id)
            WHERE m.subject = '' AND m.metric IN ({", ".join(f"'{n}'" for n in FIGURES)})
            GROUP BY ALL)
    -- named by the hardware where all the covered runs of the window span several, as the newest do not tell
    SELECT * REPLACE ({per_hardware('model', 'covered')} AS model) FROM cov ORDER BY run_time DESC""",
           params)
    d["coverage"] = [describe(Coverage(graphs=int(r.cudagraph_graphs or 0), partitions=int(r.cudagraph_partitions or 0),
                                       skips=int(r.cudagraph_skips or 0), rerecords=int(r.cudagraph_rerecords or 0),
                                       replay_share=None if pd.isna(r.cudagraph_replay_share) else r.cudagraph_replay_share))
                     for r in d.itertuples()]
    return d.assign(replayed_pct=100 * d.pop("cudagraph_replay_share").astype(float))
