-- Why a compile cache missed: each FX graph / AOTAutograd cache event's key, and the key's
-- components as torch logged them (one row per "[hash] name: text" line), each with the part of the
-- key it is (ingest/formats/cache_key.py: graph, config, torch_version, inputs, other). Two lookups
-- whose keys differ differ in the components whose hashes differ.
ALTER TABLE cache_events ADD COLUMN cache_key VARCHAR;

CREATE TABLE cache_key_components (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,             -- the cache event's line: (file_id, line_no) is its cache_events row
    compile_id      VARCHAR,
    rank            INTEGER,
    cache           VARCHAR,            -- fx_graph | aotautograd
    part            VARCHAR,            -- graph | config | torch_version | inputs | other
    name            VARCHAR,            -- gm, inductor_config[size_asserts], example_inputs[0], ...
    hash            VARCHAR,            -- the component's own hash, as logged
    text            VARCHAR,            -- as logged, cut to 8,000 characters
    cut             BOOLEAN             -- text was cut
);
