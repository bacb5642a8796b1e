"""The collector's typed errors: a one-line title and a hint that names the fix (as ingest.errors)."""
from __future__ import annotations

from ingest.errors import CompileWatchError


class CollectError(CompileWatchError):
    """The collector could not start or finish a run."""


class OutputNotWritableError(CollectError):
    hint = "pass --out with a folder you can write to"


class TorchMissingError(CollectError):
    hint = "install torch into that interpreter (pip install 'compilewatch[collect]' or a CUDA build of torch)"


class UnknownModelError(CollectError):
    hint = "run `compilewatch bench --list-models` to see the built-in models"


class ModelUnavailableError(CollectError):
    """A built-in model whose package (torchvision, timm, transformers) is not installed."""


class CommandNotFoundError(CollectError):
    hint = "check the command after `--` (is it on PATH, or does it need `python` in front?)"
