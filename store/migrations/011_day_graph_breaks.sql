-- Graph breaks per day rollup cell (store/day_rollups.py) and break key, so the Hotspots page over a
-- long window reads rows that grow with days x keys, not with runs. A run lies in one cell, so runs
-- add up across cells; first_seen/last_seen are the earliest and latest run time of the cell's runs
-- with the key, and the reason and example stack are those of the latest such run (what the page
-- shows), kept with the time they were seen so a window's latest is taken across cells.
CREATE TABLE rollup_day_graph_breaks (
    day             DATE,
    model           VARCHAR,
    hardware        VARCHAR,
    torch_version   VARCHAR,
    label           VARCHAR,
    break_key       VARCHAR,
    n               BIGINT,             -- occurrences
    runs            BIGINT,             -- runs of the cell with this key
    first_seen      TIMESTAMP,
    last_seen       TIMESTAMP,
    gb_type         VARCHAR,
    gb_code         VARCHAR,
    reason          VARCHAR,            -- of the run seen last
    explanation     VARCHAR,
    hints           VARCHAR,
    user_file       VARCHAR,
    user_line       INTEGER,
    user_function   VARCHAR,
    example_stack   VARCHAR,            -- of the latest run that logged one
    stack_seen      TIMESTAMP           -- that run's time
);
