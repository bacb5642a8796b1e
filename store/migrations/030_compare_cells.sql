-- Compare's two sides per cell, so two torch versions over a long window are compared from a few
-- rows per model, day (or week) and key instead of every run's rollup rows: at 300,000 runs a
-- 90-day window's sides held ~75,000 runs, and reading them scanned each per-run rollup whole. Day
-- cells are day x model x hardware x torch version (the run's model: the page filters runs by it;
-- no label: a label filter, and sides that are labels or commits, read the runs); week cells the
-- same per week (Monday, as 027's), summed from their days. A window reads its whole weeks from the
-- week cells and its edge days from the day cells. Every figure the page shows adds up across
-- cells: counts and sums; the distinct breaks are the union of the cells' keys; a run's rows lie in
-- one cell, so runs per key add up too; the step and iteration times' medians are taken over the
-- values the cells keep (a value per run and callable: DDSketch bins of 0.5% held as many rows as
-- the values at ~25 runs a week cell), their range as min and max. Kept by store/compare_cells.py
-- in the transaction of each file, after the per-run rollups. Plain tables, no keys: the team store
-- may be DuckLake.

-- the cell's runs and their totals (rollup_run_totals; null where none of its runs has a totals row)
CREATE TABLE rollup_compare_day_totals (
    day             DATE,               -- the run time's UTC day (store/run_keys.py RUN_TIME)
    model           VARCHAR,
    hardware        VARCHAR,            -- store/run_keys.py HARDWARE
    torch_version   VARCHAR,
    runs            BIGINT,
    graph_breaks    BIGINT,
    recompiles      BIGINT,
    limit_hits      BIGINT,
    compile_s       DOUBLE
);

-- per break key: occurrences, the runs that hit it, and one run's type, reason and location (any)
CREATE TABLE rollup_compare_day_breaks (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    break_key       VARCHAR,
    n               BIGINT,
    runs            BIGINT,
    gb_type         VARCHAR,
    reason          VARCHAR,
    location        VARCHAR             -- user_file:user_line
);

-- per function: recompiles, limit hits, and guard failures per category
CREATE TABLE rollup_compare_day_functions (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    kind            VARCHAR,            -- recompiles | limit_hits | guard_failures
    function        VARCHAR,            -- as stored for recompiles; '?' for none elsewhere
    category        VARCHAR,            -- guard_failures only
    n               BIGINT
);

-- step and iteration times (run_metrics, the timing hooks' figures) per metric and callable: the
-- rows' values and spreads, sorted
CREATE TABLE rollup_compare_day_steps (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    metric          VARCHAR,            -- step_time | iteration_time
    subject         VARCHAR,
    runs            BIGINT,
    low             DOUBLE,
    high            DOUBLE,
    vals            DOUBLE[],
    spreads         DOUBLE[]            -- null where none of the rows has one
);

CREATE TABLE rollup_compare_week_totals (
    week            DATE,               -- Monday of the run time's UTC week (date_trunc('week'))
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    runs            BIGINT,
    graph_breaks    BIGINT,
    recompiles      BIGINT,
    limit_hits      BIGINT,
    compile_s       DOUBLE
);

CREATE TABLE rollup_compare_week_breaks (
    week            DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    break_key       VARCHAR,
    n               BIGINT,
    runs            BIGINT,
    gb_type         VARCHAR,
    reason          VARCHAR,
    location        VARCHAR
);

CREATE TABLE rollup_compare_week_functions (
    week            DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    kind            VARCHAR,
    function        VARCHAR,
    category        VARCHAR,
    n               BIGINT
);

CREATE TABLE rollup_compare_week_steps (
    week            DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    metric          VARCHAR,
    subject         VARCHAR,
    runs            BIGINT,
    low             DOUBLE,
    high            DOUBLE,
    vals            DOUBLE[],
    spreads         DOUBLE[]
);
