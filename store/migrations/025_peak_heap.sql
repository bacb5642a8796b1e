-- CPU jobs' peak memory as the steps hold it: the most C-heap bytes in use (glibc's mallinfo2) read by
-- the timing hooks right after steady calls of a compiled callable (timings.json "peak_heap_bytes").
-- The resident-set peak beside it holds torch's compile and the allocator's cached pages, in which
-- a change to the activations is lost. NULL on GPUs, without glibc, and in files written before it.
ALTER TABLE timing_summaries ADD COLUMN peak_heap_bytes BIGINT;
