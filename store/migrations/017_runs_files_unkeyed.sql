-- embedded only: runs and files without their keys (DuckLake never had them; see store/lake.py).
-- DuckDB writes a table's whole key index at every checkpoint after a write to the table, and an
-- ingest writes to both: at 100,000 runs that was ~0.3 s for runs' key and ~0.12 s for files' at
-- each checkpoint, ~0.4 s of a one-bundle ingest's 1.4 s, growing with the store. The keys guarded
-- nothing the writer lock does not: a file is claimed (looked up and written) under it, so a run and
-- a file's content are stored once, as DuckLake's claims keep them. Their lookups did not use the
-- indexes. DuckDB cannot drop a key, so each table is built again without it.
CREATE TABLE runs_unkeyed (
    run_id          VARCHAR NOT NULL,
    model           VARCHAR,
    label           VARCHAR,
    command         VARCHAR,
    started_at      TIMESTAMP,
    ended_at        TIMESTAMP,
    exit_status     INTEGER,
    end_reason      VARCHAR,
    host            VARCHAR,
    git_commit      VARCHAR,
    torch_version   VARCHAR,
    triton_version  VARCHAR,
    cuda_version    VARCHAR,
    python_version  VARCHAR,
    gpu_name        VARCHAR,
    source          VARCHAR,
    manifest_json   VARCHAR,
    ingested_at     TIMESTAMP DEFAULT current_timestamp,
    device_kind     VARCHAR,
    world_size      INTEGER,
    cpu_model       VARCHAR,
    hardware        VARCHAR,
    uploaded_by     VARCHAR
);
-- the rows in the order they were written
INSERT INTO runs_unkeyed BY NAME SELECT * FROM runs ORDER BY rowid;
DROP TABLE runs;
ALTER TABLE runs_unkeyed RENAME TO runs;

CREATE TABLE files_unkeyed (
    file_id         BIGINT NOT NULL,
    run_id          VARCHAR NOT NULL,
    sha256          VARCHAR NOT NULL,
    size_bytes      BIGINT,
    kind            VARCHAR,
    original_name   VARCHAR,
    stored_path     VARCHAR,
    status          VARCHAR,
    parser_version  INTEGER,
    records         BIGINT,
    errors          BIGINT,
    ingested_at     TIMESTAMP DEFAULT current_timestamp
);
INSERT INTO files_unkeyed BY NAME SELECT * FROM files ORDER BY rowid;
DROP TABLE files;
ALTER TABLE files_unkeyed RENAME TO files;
