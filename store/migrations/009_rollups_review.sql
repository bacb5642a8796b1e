-- Rollups kept at ingest, and the Overview's review kept per store version.
--
-- Rollups: the pages and the review read these instead of the event tables, so a page's cost grows
-- with runs x distinct keys, not with events. The grain is one run x one key: a run's day, model,
-- hardware and torch version are the runs row's (joined at read time, so a later file that fills a
-- run's gaps moves its rollups with it), and distinct-run counts stay exact. Every rollup of a run is
-- rebuilt from that run's rows (WHERE run_id = ?) inside the transaction of each of its files
-- (store/rollups.py), so they never disagree with the events, whatever batches wrote the rows.
-- Plain tables, no keys: the team store may be DuckLake.

-- graph_breaks per run and break key (the hotspot key, store/rollups.py BREAK_KEY)
CREATE TABLE rollup_graph_breaks (
    run_id          VARCHAR NOT NULL,
    break_key       VARCHAR,
    n               BIGINT,             -- occurrences in the run
    gb_type         VARCHAR,            -- one of the run's occurrences' (any), as the hotspot shows it
    gb_code         VARCHAR,
    reason          VARCHAR,            -- coalesce(reason_norm, reason)
    raw_reason      VARCHAR,
    explanation     VARCHAR,
    hints           VARCHAR,
    user_file       VARCHAR,
    user_line       INTEGER,
    user_function   VARCHAR,
    example_stack   VARCHAR             -- a user stack of the run's occurrences, when one was logged
);

-- recompiles per run and function (coalesce(function, '?')): the storms and the review's recompile keys
CREATE TABLE rollup_recompiles (
    run_id          VARCHAR NOT NULL,
    function        VARCHAR,
    n               BIGINT,
    file            VARCHAR,
    line            INTEGER,
    first_reason    VARCHAR,            -- the reason of the run's first recompile of the function (lowest line_no)
    first_ts        DOUBLE,
    last_ts         DOUBLE,
    burst           BIGINT              -- most recompiles of the function within one minute (0 without timestamps)
);

-- guard_failures per run, function, category and guard key (the readers group nulls as they need)
CREATE TABLE rollup_guard_failures (
    run_id          VARCHAR NOT NULL,
    function        VARCHAR,            -- as stored (null when the log did not say)
    category        VARCHAR,
    guard_key       VARCHAR,
    n               BIGINT,
    first_line_no   BIGINT,             -- the group's first failure in the run's log
    first_raw       VARCHAR,            -- its raw guard
    raw             VARCHAR,            -- one failure's raw guard (any)
    source_name     VARCHAR,
    expected        VARCHAR,
    actual          VARCHAR
);

-- limit_hits per run, function and limit
CREATE TABLE rollup_limit_hits (
    run_id          VARCHAR NOT NULL,
    function        VARCHAR,            -- as stored
    limit_name      VARCHAR,
    n               BIGINT,
    limit_value     INTEGER,
    file            VARCHAR,
    line            INTEGER,
    reason          VARCHAR
);

-- compile time per run and frame (co_name, file base name, first line: paths differ across hosts,
-- base names and lines do not) split into the phases of app/queries/compile_time.py, each summed
-- over the frame's compiles in the run. Compiles that name no frame are one row with a null co_name:
-- they count in a run's compile time, not in any frame's.
CREATE TABLE rollup_compile_time (
    run_id          VARCHAR NOT NULL,
    co_name         VARCHAR,
    co_file         VARCHAR,            -- base name of co_filename
    co_firstlineno  INTEGER,
    co_filename     VARCHAR,            -- one full path (any)
    compiles        BIGINT,
    recompiles      BIGINT,
    total_s         DOUBLE,             -- entire-frame compile time (null when no compile logged it)
    recompile_s     DOUBLE,             -- of the recompiles alone (null when none)
    tracing_s       DOUBLE,
    aot_s           DOUBLE,
    inductor_s      DOUBLE,
    autotune_s      DOUBLE,
    cache_misses    BIGINT,             -- FX graph / AOTAutograd cache lookups that missed
    cache_miss_s    DOUBLE              -- compile time of the compiles that missed
);

-- The Overview's review (its verdicts and the hotspots and storms beside them), computed once per
-- store version and view (app/queries/review.py), so a page load reads rows. store_version names the
-- committed files (store/review_cache.py); a new ingest or reingest makes a new version, and rows
-- of older versions are dropped when a newer one is kept.
CREATE TABLE review_snapshots (
    view_key        VARCHAR NOT NULL,   -- the view's filters and the review's rules, hashed
    store_version   VARCHAR NOT NULL,
    computed_at     TIMESTAMP NOT NULL, -- UTC: what the Overview shows as "as of"
    seconds         DOUBLE,             -- how long the computation took
    columns_json    VARCHAR NOT NULL    -- {part: [column, ...]}: an empty part keeps its columns
);
CREATE TABLE review_rows (
    view_key        VARCHAR NOT NULL,
    store_version   VARCHAR NOT NULL,
    computed_at     TIMESTAMP NOT NULL, -- its snapshot's (two hosts may keep the same view at once)
    part            VARCHAR NOT NULL,   -- verdicts | hotspots | storms
    row_no          INTEGER NOT NULL,
    row_json        VARCHAR NOT NULL    -- one row of the part's frame, as JSON
);
