-- A run's compile time is what the job waited for: each compile id's forward compile
-- (compilation_metrics), its backward compile and the runtime autotuning of its first calls
-- (store/compile_time.py). Those come in records of their own after the forward's, one row each
-- here (ingest/trace/parsers/later_compile_metrics.py). Stored runs get them when
-- `compilewatch reingest` re-parses their traces (parser version 8); until then they count their
-- forward compiles alone, as before.
CREATE TABLE later_compile_metrics (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,            -- the frame compile's id, without an attempt: "0/0", "!1/2/0"
    compiled_autograd_id INTEGER,
    frame_id        INTEGER,
    frame_compile_id INTEGER,
    rank            INTEGER,
    event           VARCHAR NOT NULL,   -- bwd_compilation_metrics | aot_autograd_backward_compilation_metrics
                                        -- | compilation_metrics_runtime | bwd_compilation_metrics_runtime
    start_time      DOUBLE,             -- epoch seconds
    backward_compile_time_s DOUBLE,     -- backward records: the lazy backward compile
    runtime_autotune_time_s DOUBLE,     -- runtime records: Triton autotuning at the first calls
    runtime_cudagraphify_time_s DOUBLE, -- runtime records: CUDA-graph recording (not counted as compile time)
    fail_type       VARCHAR
);

-- The phases of a frame's compile time beside tracing, AOT, Inductor and autotuning: total_s is now
-- forward_s + backward_s + runtime_autotune_s (forward_s is what total_s was).
ALTER TABLE rollup_compile_time ADD COLUMN forward_s DOUBLE;
ALTER TABLE rollup_compile_time ADD COLUMN backward_s DOUBLE;
ALTER TABLE rollup_compile_time ADD COLUMN runtime_autotune_s DOUBLE;
ALTER TABLE rollup_day_compile_time ADD COLUMN forward_s DOUBLE;
ALTER TABLE rollup_day_compile_time ADD COLUMN backward_s DOUBLE;
ALTER TABLE rollup_day_compile_time ADD COLUMN runtime_autotune_s DOUBLE;
ALTER TABLE rollup_month_compile_time ADD COLUMN forward_s DOUBLE;
ALTER TABLE rollup_month_compile_time ADD COLUMN backward_s DOUBLE;
ALTER TABLE rollup_month_compile_time ADD COLUMN runtime_autotune_s DOUBLE;

-- Time to the first completed step (collectors/hooks.py): from the process's start to the end of
-- its first optimizer step (else of the first call of its outermost compiled callable).
ALTER TABLE timing_summaries ADD COLUMN time_to_first_step_s DOUBLE;
ALTER TABLE timing_summaries ADD COLUMN first_step_source VARCHAR;   -- optimizer_step | compiled_call
