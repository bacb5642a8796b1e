"""compilewatch ingest: torch.compile logs -> DuckDB. No torch, no streamlit in here."""

PARSER_VERSION = 2  # 2: per-compile-id artifacts
