"""compilewatch collectors: wrap a torch.compile job (TORCH_LOGS, TORCH_TRACE, timing hooks) or run
the eager-vs-compiled benchmark, and write bundles that ingest reads. Importing this package does
not import torch; only the code that runs models does."""

from compilewatch.collectors.version import __version__  # noqa: F401
