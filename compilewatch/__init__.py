"""compilewatch: graph breaks, recompile storms and compile speedups across a team's torch.compile runs.

Installed, every room is a subpackage of this one, floor by floor from the top (pyproject.toml's
import-linter contract keeps the arrows pointing down):

    compilewatch.cli         the command line (`compilewatch ...`, `python -m compilewatch ...`)
    compilewatch.app         the Streamlit dashboard
    compilewatch.integrations  (beside app) trainer callbacks, Lightning and Hugging Face, collecting in process
    compilewatch.review      the weekly verdict    compilewatch.deepdive   per-compile artifacts
    compilewatch.collectors  wraps a training job: TORCH_LOGS, TORCH_TRACE, timing hooks -> bundle
    compilewatch.ingest      every log format -> rows
    compilewatch.store       the store (embedded DuckDB or DuckLake), migrations, derived facts
    compilewatch.core        settings, safe text, typed errors: what every floor may import
"""


# Public names loaded on first use: `compilewatch.collect(...)`, the in-process collector, costs no
# import (nor torch) to a command line that imports this package. Named by string: this package is
# the parent of every floor, so an import statement here would read, to the layers contract, as
# every floor importing the collector.
_LAZY = {"collect": ("compilewatch.collectors.in_process", "collect")}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'compilewatch' has no attribute {name!r}")
