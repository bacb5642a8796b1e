-- Per-compile-id artifacts of a TORCH_TRACE: the graphs, guards, generated code and other payloads
-- tlparse shows for one compile id, kept compressed so one can be shown without rereading the raw
-- file (which may be gzipped: no cheap seek into it). Plain table, no keys: DuckLake allows none.
-- One artifact is (file_id, line_no); listings read everything but payload_z.

CREATE TABLE artifacts (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,             -- the envelope's line in the raw file
    compile_id      VARCHAR,
    rank            INTEGER,
    kind            VARCHAR NOT NULL,   -- the envelope key: dynamo_output_graph, inductor_output_code, artifact, ...
    name            VARCHAR,            -- an artifact's name; the output code's file; a graph dump's name
    encoding        VARCHAR,            -- string | json
    size_bytes      BIGINT,             -- the payload as logged, before compression
    payload_z       BLOB                -- zlib-compressed UTF-8 payload
);
