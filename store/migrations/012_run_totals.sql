-- One row per run with events: its totals, summed from its per-run rollups (store/rollups.py), so
-- the Overview's per-run figures and the recompile timeline's default run read one row a run
-- instead of grouping every run's rollup rows at page load.
CREATE TABLE rollup_run_totals (
    run_id          VARCHAR NOT NULL,
    graph_breaks    BIGINT,
    recompiles      BIGINT,
    limit_hits      BIGINT,
    guard_failures  BIGINT,
    compile_s       DOUBLE              -- entire-frame compile time, summed (null when none logged it)
);
