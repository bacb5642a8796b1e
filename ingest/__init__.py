"""compilewatch ingest: torch.compile logs -> DuckDB. No torch, no streamlit in here."""

PARSER_VERSION = 1
