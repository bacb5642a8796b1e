"""Typed errors. Each carries a one-line title and a hint that names the fix; the CLI and the
dashboard print both instead of a traceback."""
from __future__ import annotations


class CompileWatchError(Exception):
    """Base of every error compilewatch raises on purpose."""

    hint: str = ""

    def __init__(self, title: str, hint: str | None = None):
        super().__init__(title)
        self.title = title
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.title} (hint: {self.hint})" if self.hint else self.title


class InputError(CompileWatchError):
    """A path or upload that cannot be read as a log, bundle or archive."""


class BundleError(InputError):
    """A bundle whose manifest is missing or malformed."""


class StoreError(CompileWatchError):
    """The DuckDB store cannot be opened, migrated or written."""


class StoreBusyError(StoreError):
    hint = "another process is writing; it retries automatically, or try again in a moment"


class StrictModeError(CompileWatchError):
    """--strict was given and some lines could not be parsed."""

    hint = "drop --strict to store what parsed, or look at the errors listed above"
