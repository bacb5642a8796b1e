-- What each frame of a run compiled, as fingerprints (store/rollups.py), so the review tells "the
-- same graphs" from "other graphs" per frame without reading a payload. An artifact's fingerprint
-- is made by the trace parser from its payload, normalised as `compilewatch diff` normalises it
-- (ingest/formats/artifact_text.py); rows stored before this migration have none until
-- `compilewatch reingest` parses their files again (PARSER_VERSION 10).
ALTER TABLE artifacts ADD COLUMN fp VARCHAR;

-- One row per run, rank and frame (function, file base name, first line): its compiles combined in
-- compile order. A part is null when none of the frame's compiles logged it (a compile loaded from
-- the FX graph or AOTAutograd cache logs no AOT graphs), and '-' stands in the combination for a
-- compile that did not log a part another of the frame's compiles logged.
CREATE TABLE rollup_frame_fingerprints (
    run_id          VARCHAR NOT NULL,
    rank            INTEGER,
    co_name         VARCHAR,
    co_file         VARCHAR,            -- the file's base name
    co_firstlineno  INTEGER,
    compiles        BIGINT,             -- compile ids of the frame
    dynamo_fp       VARCHAR,            -- the Dynamo output graphs
    aot_fwd_fp      VARCHAR,            -- the AOT forward (or inference) graphs
    aot_bwd_fp      VARCHAR,            -- the AOT backward graphs
    code_fp         VARCHAR,            -- Inductor's output code
    guards_fp       VARCHAR,            -- the guards
    fp              VARCHAR             -- all five together
);
