-- Why a compile cache missed: each FX graph / AOTAutograd cache lookup's key, and the key's
-- components as torch logged them ("[hash] name: text" lines), each with the part of the key it is
-- (ingest/formats/cache_key.py: graph, config, torch_version, inputs, other). Two lookups whose keys
-- differ differ in the components whose hashes differ.
--
-- A key has 300-700 components, most of them settings that every lookup of a run repeats; stored
-- for each lookup they made an ingest's CPU 74% higher (docs/PERFORMANCE.md). So a file's first lookup
-- of each cache (and rank) keeps all its components, and each later one only those that differ from
-- the lookup before it (a row with no hash: a component that one had and this one has not); its
-- cache_events row names that lookup in components_base.
ALTER TABLE cache_events ADD COLUMN cache_key VARCHAR;
ALTER TABLE cache_events ADD COLUMN components INTEGER;       -- how many components torch logged for the key
ALTER TABLE cache_events ADD COLUMN components_base BIGINT;   -- line_no of the lookup (same file, rank, cache) this one's rows add to

CREATE TABLE cache_key_components (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    line_no         BIGINT,             -- the cache lookup's line: (file_id, line_no) is its cache_events row
    compile_id      VARCHAR,
    rank            INTEGER,
    cache           VARCHAR,            -- fx_graph | aotautograd
    part            VARCHAR,            -- graph | config | torch_version | inputs | other
    name            VARCHAR,            -- gm, inductor_config[size_asserts], example_inputs[0], ...
    hash            VARCHAR,            -- the component's own hash, as logged; NULL: absent from this key
    text            VARCHAR,            -- as logged, cut to 8,000 characters; NULL: a long text this file
                                        -- holds already under the same hash
    cut             BOOLEAN             -- text was cut
);
