-- CUDA-graph coverage per process (per rank), from timings.json: torch's own counters
-- (dynamo_counters.inductor) and the hooks' count of the CUDA-graph tree manager's calls.
-- NULL where the file does not say (older hooks, a job that never used CUDA graphs).
ALTER TABLE timing_summaries ADD COLUMN cudagraph_skips BIGINT;       -- inductor.cudagraph_skips: graphs run without CUDA graphs
ALTER TABLE timing_summaries ADD COLUMN cudagraph_partitions BIGINT;  -- inductor.cudagraph_partitions: partitions of graphs split around ops a CUDA graph cannot hold
ALTER TABLE timing_summaries ADD COLUMN cudagraph_recordings BIGINT;  -- CUDA graphs recorded (the hooks)
ALTER TABLE timing_summaries ADD COLUMN cudagraph_replays BIGINT;     -- CUDA-graph replays (the hooks)
ALTER TABLE timing_summaries ADD COLUMN compiled_calls BIGINT;        -- calls of the compiled callables
ALTER TABLE timing_summaries ADD COLUMN replayed_calls BIGINT;        -- of those, calls that replayed a CUDA graph
