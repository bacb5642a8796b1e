"""The TORCH_LOGS components a collected job logs by default, apart from collect.py so the CLI can
show them in `compilewatch collect --help` without importing the collector (and, through it, the
environment probes) on every command.

The default loses nothing the store can read: every component a TORCH_LOGS parser reads
(``ingest/text/registry.py: COMPONENTS``, so a new parser extends it), plus those kept for the
people who read the log themselves. What the added `cudagraphs` component costs in log size and
wall time is measured by ``benchmarks/bench_default_logs.py`` (README, "Measured")."""
from compilewatch.ingest.text.registry import COMPONENTS

# Read by no parser, kept because the job's own log is read by people too: Inductor's hints
# ("Using FallbackKernel ...") say where a compiled graph leaves performance behind.
FOR_READERS = ("perf_hints",)

DEFAULT_LOGS = tuple(dict.fromkeys(COMPONENTS + FOR_READERS))

# The default before the `cudagraphs` component joined it: what benchmarks/bench_default_logs.py
# compares against.
PREVIOUS_DEFAULT_LOGS = ("graph_breaks", "recompiles", "perf_hints")
