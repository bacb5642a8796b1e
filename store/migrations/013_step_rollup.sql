-- The timing hooks' steps per run, callable and mode (store/rollups.py), so the compile-time page's
-- runtime linkage reads a row per compiled callable of a run instead of every step.
CREATE TABLE rollup_steps (
    run_id          VARCHAR NOT NULL,
    callable        VARCHAR,
    mode            VARCHAR,
    calls           BIGINT,             -- timed calls
    compile_steps   BIGINT,             -- calls that compiled (phase 'compile')
    compile_ms      DOUBLE,             -- their time, summed
    steady_calls    BIGINT,             -- calls at steady speed (phase 'steady')
    steady_ms       DOUBLE              -- their median
);
