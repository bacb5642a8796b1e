"""compilewatch ingest: torch.compile logs -> DuckDB. No torch, no streamlit in here."""

PARSER_VERSION = 8  # 2: per-compile-id artifacts; 3: compiles.autotune_time_s; 4: timing_summaries + iteration period; 5: graph-break hints as a JSON list; 6: cudagraph_events; 7: compiles.guard_latency_us, num_graph_breaks, _us twins; bwd/runtime metrics kept; 8: subgraphs (regional names, vLLM pieces and post-grad passes)
