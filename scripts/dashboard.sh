#!/usr/bin/env bash
# Sets up and starts the dashboard on the embedded DuckDB store, with sample_logs/ loaded.
# COMPILEWATCH_DB picks another database file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export COMPILEWATCH_DB=${COMPILEWATCH_DB:-.compilewatch/compilewatch.duckdb}
# Re-ingesting is free: files already stored are recognised by their sha256.
.venv/bin/compilewatch ingest sample_logs --db "$COMPILEWATCH_DB" --quiet > /dev/null || true
exec .venv/bin/compilewatch dashboard --db "$COMPILEWATCH_DB" "$@"
