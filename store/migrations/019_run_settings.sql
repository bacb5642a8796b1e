-- The evidence the review reads before it puts a slower run down to the machine.
-- run_settings: the settings a job ran under that change its speed without changing a graph, as the
-- timing hooks read them when the job ended (timings.json "settings", ingest/bundle.py TIMINGS_DOC):
-- one row per rank and name. A run whose timings carry no "settings" (collected before they were
-- recorded) has no rows, which says nothing about its settings.
CREATE TABLE run_settings (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    rank            INTEGER,
    name            VARCHAR,            -- e.g. torch.get_num_threads(), torch._inductor.config.max_autotune, OMP_NUM_THREADS
    value           VARCHAR,            -- as text
    source          VARCHAR             -- torch | dynamo_config | inductor_config | functorch_config | env
);

-- host_probes: the fixed workload `compilewatch collect` timed in a process of its own before the job
-- started and after it ended (manifest "host_probe", collectors/host_probe.py): one row per probe.
CREATE TABLE host_probes (
    run_id          VARCHAR NOT NULL,
    file_id         BIGINT,
    phase           VARCHAR,            -- before | after
    device          VARCHAR,            -- cpu | cuda:0
    device_name     VARCHAR,
    threads         INTEGER,            -- torch's intra-op threads in the probe's process
    workload        VARCHAR,
    median_ms       DOUBLE,             -- median of its rounds; null when the probe failed
    iqr_ms          DOUBLE,
    min_ms          DOUBLE,
    samples         INTEGER,            -- rounds timed
    process_s       DOUBLE,             -- the probe process's wall time, start and torch's import included
    load_avg        DOUBLE,             -- the host's 1-minute load average as it started
    error           VARCHAR             -- why the probe gave no time
);
