-- The Overview's KPIs per cell, so its figures over a year read the month cells (and the partial
-- months' day cells) instead of every run of both windows. Each figure adds up across cells: runs
-- and the run totals (012) are sums; distinct models and hardware are unions of the cells' keys; a
-- model's geomean speedup is exp(sum of ln(run geomean) / runs with one), so the cells keep that
-- sum and that count per model. Day cells as 010 (day x model x hardware x torch version x label),
-- kept by store/day_rollups.py; month cells as 014, summed from the day rows by
-- store/month_rollups.py; both in the transaction of each file. Plain tables, no keys: the team
-- store may be DuckLake.

-- the cell's runs and their totals (rollup_run_totals; a run without events counts 0)
CREATE TABLE rollup_day_run_totals (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    runs            BIGINT,
    graph_breaks    BIGINT,
    recompiles      BIGINT,
    compile_s       DOUBLE              -- null when none of the cell's runs logged compile time
);

-- per cell and bench model (a bench row's own model, else its run's: store/run_speedups.py): the
-- runs with a positive geomean speedup for that model, and the sum of its logarithms
CREATE TABLE rollup_day_speedups (
    day             DATE,
    model           VARCHAR,            -- the runs' model, as in every cell
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    bench_model     VARCHAR,
    ln_sum          DOUBLE,
    runs            BIGINT
);

CREATE TABLE rollup_month_run_totals (
    month           DATE,               -- first day of the month
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    runs            BIGINT,
    graph_breaks    BIGINT,
    recompiles      BIGINT,
    compile_s       DOUBLE
);

CREATE TABLE rollup_month_speedups (
    month           DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    bench_model     VARCHAR,
    ln_sum          DOUBLE,
    runs            BIGINT
);
