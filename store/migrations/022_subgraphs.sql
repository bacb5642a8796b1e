-- Subgraphs a compile is split into (ingest/formats/subgraphs.py). Regional compilation names the
-- subgraph on each record's envelope (subgraph_name); vLLM's piecewise backend logs a compile start
-- per piece and compile range, and the records after it are that piece's (piece_line: the start's
-- line in the same file); its post-grad passes are graph dumps named vllm_post_grad.<index>.<Pass>
-- (pass_index, pass_name), their patterns vllm_patterns.<Pass> (pass_name).
ALTER TABLE artifacts ADD COLUMN subgraph_name VARCHAR;
ALTER TABLE artifacts ADD COLUMN piece_line BIGINT;
ALTER TABLE artifacts ADD COLUMN pass_index INTEGER;
ALTER TABLE artifacts ADD COLUMN pass_name VARCHAR;

-- One row per vllm_piecewise_compile_start: which piece of the split graph, for which compile range.
CREATE TABLE piecewise_compiles (
    run_id              VARCHAR NOT NULL,
    file_id             BIGINT,
    line_no             BIGINT,             -- the compile start's line; artifacts.piece_line points here
    rank                INTEGER,
    vllm_model          INTEGER,            -- 0 for the file's first compilation config, 1 for the next ...
    piecewise_index     INTEGER,            -- the piece's place in the split graph
    submod_name         VARCHAR,            -- submod_0, or subgraph_<index> when vLLM logged none
    total_pieces        INTEGER,            -- total_piecewise_compiles: pieces x ranges to compile
    range_start         BIGINT,
    range_end           BIGINT,
    is_single_size      BOOLEAN,
    is_cudagraph_size   BOOLEAN,            -- a CUDA-graph capture size
    compile_range       VARCHAR             -- "size 8" | "range [1, 8192]", as tlparse groups them
);
