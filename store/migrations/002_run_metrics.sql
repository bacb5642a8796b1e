-- compilewatch store, schema version 2: the hardware a run ran on, the iteration period and the
-- hooks' per-process figures, and per-run metrics in long form.
-- Plain tables and ADD COLUMN only: the team store may be DuckLake, which has no keys or indexes.

-- Hardware is a dimension: figures are only compared between runs on the same hardware.
ALTER TABLE runs ADD COLUMN device_kind VARCHAR;    -- cpu | cuda | xpu | mps | unknown
ALTER TABLE runs ADD COLUMN world_size INTEGER;     -- processes (ranks) of the job; 1 when it ran alone
ALTER TABLE runs ADD COLUMN cpu_model VARCHAR;      -- e.g. "AMD EPYC 9654", when the collector saw it
ALTER TABLE runs ADD COLUMN hardware VARCHAR;       -- display and grouping key, e.g. "NVIDIA H200 ×1", "CPU (AMD EPYC) ×1", "unknown"

-- step_timings rows of mode 'iteration' are the iteration period (time between optimizer steps,
-- or between calls of the outermost compiled callable); rank says which process timed them.
ALTER TABLE step_timings ADD COLUMN rank INTEGER;

-- One row per timings.json (per rank): what the hooks measured for the whole process.
CREATE TABLE timing_summaries (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    rank            INTEGER,
    world_size      INTEGER,
    device          VARCHAR,            -- cuda:0 | cpu
    gpu_name        VARCHAR,
    cpu_model       VARCHAR,
    compile_time_s  DOUBLE,             -- wall time of the calls that compiled (first calls + recompiles)
    peak_mem_bytes  BIGINT,             -- device peak (CUDA max_memory_allocated)
    peak_rss_bytes  BIGINT,             -- host peak resident memory of the process
    iteration_source VARCHAR,           -- optimizer_step | compiled_call
    iteration_clock VARCHAR             -- cuda_event | host
);

-- Every per-run figure the review, the report and the gate read, one row per metric and subject.
-- Rebuilt for a run inside each of its files' ingest transactions (ingest/run_metrics.py); unit and
-- direction come from that module's table of metrics.
CREATE TABLE run_metrics (
    run_id          VARCHAR NOT NULL,
    metric          VARCHAR NOT NULL,   -- speedup | step_time | iteration_time | compile_time | ...
    subject         VARCHAR NOT NULL,   -- a callable or benchmark; '' for the whole run
    value           DOUBLE,
    unit            VARCHAR,            -- x | ms | s | bytes | count | ratio
    direction       VARCHAR,            -- higher | lower: which way is better
    n               INTEGER,            -- samples behind value (steady steps, ranks, events)
    spread          DOUBLE,             -- run-to-run or step-to-step spread in value's unit (IQR), when known
    source          VARCHAR             -- bench | hooks | trace | text | logs
);
