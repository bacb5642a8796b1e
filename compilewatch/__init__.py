"""compilewatch: graph breaks, recompile storms and compile speedups across a team's torch.compile runs.

Installed, every room is a subpackage of this one, floor by floor from the top (pyproject.toml's
import-linter contract keeps the arrows pointing down):

    compilewatch.cli         the command line (`compilewatch ...`, `python -m compilewatch ...`)
    compilewatch.app         the Streamlit dashboard
    compilewatch.review      the weekly verdict    compilewatch.deepdive   per-compile artifacts
    compilewatch.collectors  wraps a training job: TORCH_LOGS, TORCH_TRACE, timing hooks -> bundle
    compilewatch.ingest      every log format -> rows
    compilewatch.store       the store (embedded DuckDB or DuckLake), migrations, derived facts
    compilewatch.core        settings, safe text, typed errors: what every floor may import
"""
