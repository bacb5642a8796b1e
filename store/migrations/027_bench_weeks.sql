-- The bench rows (bench_results) summed per week cell: week x model x hardware x torch version, the
-- model being the bench row's own (one CSV, many models), else its run's, as the Trends page names
-- it. Trends over a long window read whole weeks from here instead of every bench row of the window:
-- at 100,000 runs a year 10,575 cells against 84,950 bench rows, and a week's cells stop growing
-- once every model has run on every kind of hardware and torch version that week. Every figure the
-- page shows decomposes over cells exactly: geomeans as sums of logs and counts, means as sums and
-- counts, distinct runs (a run's rows of one model lie in one cell), first and last run times, and
-- the labels seen. No label in the cell (users give labels freely: a cell per run); a label filter
-- reads the bench rows. Kept by store/bench_weeks.py in the transaction of each file, after the day
-- rollups, whose cells say which weeks to sum again. Plain table, no keys: the team store may be DuckLake.

CREATE TABLE rollup_week_bench (
    week            DATE,               -- Monday of the run time's UTC week (date_trunc('week'))
    model           VARCHAR,            -- coalesce(bench_results.model, runs.model)
    hardware        VARCHAR,            -- store/run_keys.py HARDWARE
    torch_version   VARCHAR,
    runs            BIGINT,             -- distinct runs with bench rows in the cell
    speedup_ln      DOUBLE,             -- sum(ln(speedup)) over speedup > 0
    speedups        BIGINT,             -- how many rows that sum holds
    compile_s       DOUBLE,             -- sum(compilation_latency_s)
    compiles        BIGINT,             -- count(compilation_latency_s)
    memory_ln       DOUBLE,             -- sum(ln(compression_ratio)) over compression_ratio > 0
    memories        BIGINT,
    first_run       TIMESTAMP,          -- store/run_keys.py RUN_TIME, earliest and latest
    last_run        TIMESTAMP,
    labels          VARCHAR[]           -- the runs' labels, distinct and sorted, nulls left out
);
