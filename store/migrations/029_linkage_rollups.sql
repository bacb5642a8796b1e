-- The compile-time page's runtime linkage per day cell and per month cell (store/day_rollups.py,
-- store/month_rollups.py), so a view over long windows reads rows that grow with cells, callables
-- and bins, not with runs. Per cell, compiled callable and mode: the sums over the cell's runs, and
-- the DDSketch bins of each run's figures whose medians the page shows (store/sketch.py: a bin's
-- estimate is within 0.5% of each value in it; bins of several cells merge by adding counts).
-- The per-run figures are store/linkage.py's. Kept in the transaction of each file, after the
-- rollups they read. Plain tables, no keys: the team store may be DuckLake.

CREATE TABLE rollup_day_linkage (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    callable        VARCHAR,
    mode            VARCHAR,            -- compiled | marked
    runs            BIGINT,             -- the cell's runs that timed the callable in this mode
    calls           BIGINT,             -- their timed calls
    compile_steps   BIGINT              -- their calls that compiled
);

-- one row per metric and bin: n of the cell's runs have a figure in the bin
CREATE TABLE rollup_day_linkage_bins (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    callable        VARCHAR,
    mode            VARCHAR,
    metric          VARCHAR,            -- steady_ms | compile_ms | compile_cost_ms | eager_ms
    sign            TINYINT,            -- 1 positive, 0 zero, -1 negative
    bin             INTEGER,            -- ceil(log_gamma |value|); 0 for zero
    n               BIGINT
);

CREATE TABLE rollup_month_linkage (
    month           DATE,               -- first day of the month
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    callable        VARCHAR,
    mode            VARCHAR,
    runs            BIGINT,
    calls           BIGINT,
    compile_steps   BIGINT
);

CREATE TABLE rollup_month_linkage_bins (
    month           DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    callable        VARCHAR,
    mode            VARCHAR,
    metric          VARCHAR,
    sign            TINYINT,
    bin             INTEGER,
    n               BIGINT
);
