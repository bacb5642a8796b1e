"""The TORCH_LOGS components a collected job logs by default, apart from collect.py so the CLI can
show them in `compilewatch collect --help` without importing the collector (and, through it, the
environment probes) on every command."""

DEFAULT_LOGS = ("graph_breaks", "recompiles", "perf_hints")
