-- The storms level: per month cell (month x model x hardware x torch version, as 014), the
-- ROWS_PER_CELL stormiest rows of store/month_storms.py, each a run and function that recompiled or
-- hit a limit, in the storms table's order. Any of a window's top N rows (N <= ROWS_PER_CELL) is
-- among its own cell's top N, so the Recompile storms page reads a year's whole months from here,
-- ~ROWS_PER_CELL rows a cell however many runs the cell holds, and only the partial months' runs
-- from the per-run rollups. Kept by store/month_storms.py in each file's transaction, after the
-- month rollups. A plain table, no keys: the team store may be DuckLake.

CREATE TABLE rollup_month_storms (
    month           DATE,               -- first day of the month
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    run_id          VARCHAR NOT NULL,
    run_time        TIMESTAMP,          -- store/run_keys.py RUN_TIME
    function        VARCHAR,
    file            VARCHAR,
    line            INTEGER,
    recompiles      BIGINT,
    limit_hits      BIGINT,
    limit_name      VARCHAR,
    burst           BIGINT,
    first_ts        DOUBLE,
    last_ts         DOUBLE,
    storm           BOOLEAN
);
