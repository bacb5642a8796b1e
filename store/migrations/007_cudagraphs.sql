-- CUDA graphs under mode="reduce-overhead": each skip ("skipping cudagraphs due to mutated inputs"),
-- with its category and the user code it points at, and each per-size re-recording warning (count:
-- the distinct input sizes seen). From the job's log (text) or compilation_metrics (trace).
CREATE TABLE cudagraph_events (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,
    rank            INTEGER,
    event           VARCHAR NOT NULL,   -- skip | re_record
    category        VARCHAR,            -- mutated_input | cpu_device | dynamic_shape | incompatible_op | ... | other
    reason          VARCHAR,            -- as torch worded it
    count           INTEGER,            -- skip: instances; re_record: distinct input sizes observed
    user_file       VARCHAR,
    user_line       INTEGER,
    user_function   VARCHAR,
    user_code       VARCHAR,
    source          VARCHAR             -- text | trace
);
