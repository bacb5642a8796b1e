"""compilewatch ingest: torch.compile logs -> DuckDB. No torch, no streamlit in here."""

PARSER_VERSION = 11  # 2: per-compile-id artifacts; 3: compiles.autotune_time_s; 4: timing_summaries + iteration period; 5: graph-break hints as a JSON list; 6: cudagraph_events; 7: compiles.guard_latency_us, num_graph_breaks, _us twins; bwd/runtime metrics kept; 8: later_compile_metrics (backward compile, runtime autotuning), time to first step; 9: timing_summaries' CUDA-graph counters; 10: artifacts.fp, a graph's, guards' or output code's fingerprint; 11: cache keys and their components
