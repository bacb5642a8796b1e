-- compilewatch store, schema version 1.
-- Every event table carries run_id + file_id so a run can be dropped or a file re-ingested
-- with a later parser version; line_no points back into the raw file kept under raw/.

CREATE TABLE runs (
    run_id          VARCHAR PRIMARY KEY,
    model           VARCHAR,
    label           VARCHAR,
    command         VARCHAR,
    started_at      TIMESTAMP,          -- UTC
    ended_at        TIMESTAMP,          -- UTC
    exit_status     INTEGER,
    end_reason      VARCHAR,            -- exited | crashed | interrupted | terminated | timeout | unknown
    host            VARCHAR,
    git_commit      VARCHAR,
    torch_version   VARCHAR,
    triton_version  VARCHAR,
    cuda_version    VARCHAR,
    python_version  VARCHAR,
    gpu_name        VARCHAR,
    source          VARCHAR,            -- bundle | loose | upload | inbox
    manifest_json   VARCHAR,
    ingested_at     TIMESTAMP DEFAULT current_timestamp
);

CREATE TABLE files (
    file_id         BIGINT PRIMARY KEY,
    run_id          VARCHAR NOT NULL,
    sha256          VARCHAR NOT NULL,
    size_bytes      BIGINT,
    kind            VARCHAR,            -- torch_trace | torch_logs | bench_csv | timings | manifest | unknown
    original_name   VARCHAR,
    stored_path     VARCHAR,            -- relative to the store folder
    status          VARCHAR,            -- ok | partial | failed
    parser_version  INTEGER,
    records         BIGINT,
    errors          BIGINT,
    ingested_at     TIMESTAMP DEFAULT current_timestamp,
    -- A loose file is the same file wherever it comes from (checked by sha256 alone in the loader);
    -- a bundle's files belong to their run: two runs may write byte-identical timings.
    UNIQUE (run_id, sha256)
);
CREATE SEQUENCE file_id_seq START 1;

CREATE TABLE compiles (
    run_id                  VARCHAR NOT NULL,
    file_id                 BIGINT,
    line_no                 BIGINT,
    compile_id              VARCHAR,     -- "[!ca/]frame/compile[_attempt]" as tlparse prints it
    frame_id                INTEGER,
    frame_compile_id        INTEGER,
    attempt                 INTEGER,
    compiled_autograd_id    INTEGER,
    rank                    INTEGER,
    co_name                 VARCHAR,
    co_filename             VARCHAR,
    co_firstlineno          INTEGER,
    start_time              DOUBLE,      -- epoch seconds
    entire_frame_compile_time_s DOUBLE,
    backend_compile_time_s  DOUBLE,
    inductor_compile_time_s DOUBLE,
    code_gen_time_s         DOUBLE,
    guard_count             INTEGER,
    shape_env_guard_count   INTEGER,
    graph_op_count          INTEGER,
    graph_node_count        INTEGER,
    graph_input_count       INTEGER,
    cache_size              INTEGER,
    accumulated_cache_size  INTEGER,
    fail_type               VARCHAR,
    fail_reason             VARCHAR,
    fail_user_frame_filename VARCHAR,
    fail_user_frame_lineno  INTEGER,
    restart_reasons         VARCHAR,     -- JSON list
    recompile_reason        VARCHAR,
    is_recompile            BOOLEAN,
    metrics_json            VARCHAR      -- every compilation_metrics field of that torch version
);

CREATE TABLE graph_breaks (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,
    rank            INTEGER,
    source          VARCHAR,            -- trace_restart | trace_artifact | text
    gb_type         VARCHAR,            -- e.g. "Data-dependent branching" (2.7+) or null
    gb_code         VARCHAR,            -- e.g. GB0170 when the log links one
    reason          VARCHAR,            -- raw reason text
    reason_norm     VARCHAR,            -- number-free, path-free reason
    explanation     VARCHAR,
    hints           VARCHAR,
    user_file       VARCHAR,
    user_line       INTEGER,
    user_function   VARCHAR,
    user_stack      VARCHAR,
    nested          BOOLEAN,            -- "While handling this graph break, another graph break occurred"
    break_key       VARCHAR             -- groups the same break across runs
);

CREATE TABLE recompiles (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    recompile_no    INTEGER,            -- ordinal within the file, links guard_failures
    compile_id      VARCHAR,
    rank            INTEGER,
    function        VARCHAR,
    file            VARCHAR,
    line            INTEGER,
    ts              DOUBLE,             -- epoch seconds when the log has a timestamp
    reason          VARCHAR,            -- first guard failure, raw
    source          VARCHAR             -- text | trace
);

CREATE TABLE guard_failures (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    recompile_no    INTEGER,
    compile_id      VARCHAR,
    rank            INTEGER,
    function        VARCHAR,
    failed_entry    VARCHAR,            -- "0/1" prefix: which cache entry's guard failed
    raw             VARCHAR,
    category        VARCHAR,            -- size_mismatch | stride_mismatch | dtype | requires_grad | object_identity | type | constant | length | global_state | dict_keys | other
    guard_key       VARCHAR,            -- number-free, groups across runs
    source_name     VARCHAR,            -- e.g. L['x']
    dimension       INTEGER,
    expected        VARCHAR,
    actual          VARCHAR
);

CREATE TABLE limit_hits (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,
    rank            INTEGER,
    limit_name      VARCHAR,            -- cache_size_limit | accumulated_cache_size_limit | recompile_limit | accumulated_recompile_limit
    limit_value     INTEGER,
    function        VARCHAR,
    file            VARCHAR,
    line            INTEGER,
    reason          VARCHAR
);

CREATE TABLE compile_phases (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,
    rank            INTEGER,
    name            VARCHAR,
    start_us        BIGINT,
    duration_us     BIGINT
);

CREATE TABLE cache_events (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,
    compile_id      VARCHAR,
    rank            INTEGER,
    cache           VARCHAR,            -- fx_graph | aotautograd | ...
    outcome         VARCHAR,            -- hit | miss | bypass
    reason          VARCHAR
);

CREATE TABLE step_timings (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    callable        VARCHAR,
    mode            VARCHAR,            -- compiled | eager | marked
    step            INTEGER,
    phase           VARCHAR,            -- compile | warmup | steady
    duration_ms     DOUBLE,
    peak_mem_bytes  BIGINT
);

CREATE TABLE bench_results (
    run_id              VARCHAR NOT NULL,
    file_id             BIGINT,
    model               VARCHAR,
    mode                VARCHAR,        -- default | reduce-overhead | max-autotune
    task                VARCHAR,        -- train | infer
    device              VARCHAR,
    batch_size          INTEGER,
    steps               INTEGER,
    speedup             DOUBLE,
    abs_latency_ms      DOUBLE,         -- compiled median step
    eager_latency_ms    DOUBLE,
    compiled_spread_ms  DOUBLE,         -- IQR of steady-state steps
    eager_spread_ms     DOUBLE,
    compilation_latency_s DOUBLE,
    compression_ratio   DOUBLE,         -- eager_peak_mem / dynamo_peak_mem
    eager_peak_mem_gb   DOUBLE,
    dynamo_peak_mem_gb  DOUBLE,
    graph_breaks        INTEGER,
    unique_graphs       INTEGER,
    recompiles          INTEGER,
    accuracy            VARCHAR
);

CREATE TABLE ingest_errors (
    run_id          VARCHAR,
    file_id         BIGINT,
    original_name   VARCHAR,
    line_no         BIGINT,
    kind            VARCHAR,            -- glog | json | payload | payload_md5 | encoding | binary | truncated | unknown_format | io
    message         VARCHAR,
    excerpt         VARCHAR
);
