-- Month rollups: the day rollups of 010 and 011 summed per month x model x hardware x torch version
-- (a "month cell": no label, which users give freely and which would keep a cell per run), so a view
-- over a long window reads whole months from here and only the partial months at its edges from the
-- day rollups. At 100,000 runs a year these hold ~1/17 of the day rollups' rows, and, the models
-- having run every month already, grow little with more runs. A run lies in one month cell, so runs
-- add up across month cells as across day cells. Kept by store/month_rollups.py in the transaction
-- of each file, after the day rollups it sums. Plain tables, no keys: the team store may be DuckLake.

CREATE TABLE rollup_month_guard_failures (
    month           DATE,               -- first day of the month
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    grain           VARCHAR NOT NULL,   -- as rollup_day_guard_failures
    category        VARCHAR,
    guard           VARCHAR,
    guard_key       VARCHAR,
    function        VARCHAR,
    n               BIGINT,
    runs            BIGINT,
    raw             VARCHAR,
    source_name     VARCHAR,
    expected        VARCHAR,
    actual          VARCHAR
);

CREATE TABLE rollup_month_recompiles (
    month           DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    function        VARCHAR,
    n               BIGINT,
    runs            BIGINT
);

CREATE TABLE rollup_month_compile_time (
    month           DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    co_name         VARCHAR,
    co_file         VARCHAR,
    co_firstlineno  INTEGER,
    co_filename     VARCHAR,
    runs            BIGINT,
    compiles        BIGINT,
    recompiles      BIGINT,
    total_s         DOUBLE,
    recompile_s     DOUBLE,
    tracing_s       DOUBLE,
    aot_s           DOUBLE,
    inductor_s      DOUBLE,
    autotune_s      DOUBLE,
    cache_misses    BIGINT,
    cache_miss_s    DOUBLE
);

CREATE TABLE rollup_month_graph_breaks (
    month           DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    break_key       VARCHAR,
    n               BIGINT,
    runs            BIGINT,
    first_seen      TIMESTAMP,
    last_seen       TIMESTAMP,
    gb_type         VARCHAR,
    gb_code         VARCHAR,
    reason          VARCHAR,
    explanation     VARCHAR,
    hints           VARCHAR,
    user_file       VARCHAR,
    user_line       INTEGER,
    user_function   VARCHAR,
    example_stack   VARCHAR,
    stack_seen      TIMESTAMP
);
