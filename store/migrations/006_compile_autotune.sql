-- Inductor's autotuning time of each compile (compilation_metrics.compile_time_autotune_time_us,
-- logged by 2.6+), in seconds: the fourth compile phase beside tracing, AOT and Inductor, read by
-- the compile-time views without parsing metrics_json. Null where the log does not say.
ALTER TABLE compiles ADD COLUMN autotune_time_s DOUBLE;
