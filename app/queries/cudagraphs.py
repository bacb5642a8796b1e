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
    (the replayed share in percent) and the coverage in words."""
    cte, params = runs_cte(f)
    pivot = ", ".join(f"max(m.value) FILTER (m.metric = '{name}') AS {name}" for name in FIGURES)
    d = df(con, f"""
    WITH {cte},
    cov AS (SELECT fr.run_id, fr.model, fr.hardware, fr.run_time, fr.torch_version, fr.label, fr.git_commit, {pivot}
            FROM run_metrics m JOIN fr USING (run_id)
            WHERE m.subject = '' AND m.metric IN ({", ".join(f"'{n}'" for n in FIGURES)})
            GROUP BY ALL
            -- a run is in coverage when it used CUDA graphs: cudagraph_skips alone is every logged run's
            HAVING count(*) FILTER (m.metric <> 'cudagraph_skips') > 0 OR max(m.value) FILTER (m.metric = 'cudagraph_skips') > 0)
    SELECT * REPLACE ({per_hardware('model', 'cov')} AS model) FROM cov ORDER BY run_time DESC LIMIT {MAX_RUNS}""",
           params)
    d["coverage"] = [describe(Coverage(graphs=int(r.cudagraph_graphs or 0), partitions=int(r.cudagraph_partitions or 0),
                                       skips=int(r.cudagraph_skips or 0), rerecords=int(r.cudagraph_rerecords or 0),
                                       replay_share=None if pd.isna(r.cudagraph_replay_share) else r.cudagraph_replay_share))
                     for r in d.itertuples()]
    return d.assign(replayed_pct=100 * d.pop("cudagraph_replay_share").astype(float))
