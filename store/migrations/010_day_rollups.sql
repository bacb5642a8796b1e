-- Day rollups: the per-run rollups of 009 summed per day x model x hardware x torch version x label
-- (a "cell") and key, so a whole-year view reads a few rows per day and key however many runs there
-- were. A run lies in exactly one cell, so a distinct-run count per cell and key adds up exactly
-- across cells. A run's cell is its runs row's; rollup_day_runs records the cell each run was summed
-- into, so when a later file moves a run (fills its start time, its hardware) both the old and the
-- new cell are summed again. Kept by store/day_rollups.py in the transaction of each file, after the
-- run's per-run rollups. Plain tables, no keys: the team store may be DuckLake.

CREATE TABLE rollup_day_runs (
    run_id          VARCHAR NOT NULL,
    day             DATE,               -- the run's time (store/run_keys.py RUN_TIME), UTC day
    model           VARCHAR,
    hardware        VARCHAR,            -- store/run_keys.py HARDWARE
    torch_version   VARCHAR,
    label           VARCHAR
);

-- guard failures per cell, at three grains (the pages' distinct counts need each):
--   'key':      category (as stored), guard, guard_key, function -> n, runs, one example
--   'category': category (null read as 'other')                  -> n, runs
--   'guard':    guard                                             -> n, runs
-- guard is coalesce(guard_key, left(raw, 120)), what the top-guards table groups by.
CREATE TABLE rollup_day_guard_failures (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    grain           VARCHAR NOT NULL,
    category        VARCHAR,
    guard           VARCHAR,
    guard_key       VARCHAR,
    function        VARCHAR,
    n               BIGINT,             -- failures
    runs            BIGINT,             -- distinct runs of the cell with this key
    raw             VARCHAR,
    source_name     VARCHAR,
    expected        VARCHAR,
    actual          VARCHAR
);

-- recompiles per cell and function (coalesce(function, '?'))
CREATE TABLE rollup_day_recompiles (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    function        VARCHAR,
    n               BIGINT,
    runs            BIGINT
);

-- compile time per cell and frame (rollup_compile_time's key), summed over the cell's runs
CREATE TABLE rollup_day_compile_time (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    co_name         VARCHAR,
    co_file         VARCHAR,
    co_firstlineno  INTEGER,
    co_filename     VARCHAR,            -- one full path (any)
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
