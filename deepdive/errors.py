"""Typed errors of the deep dive (the CLI turns them into a sentence, a hint and exit 2)."""
from __future__ import annotations

from ingest.errors import InputError


class NotFoundError(InputError):
    """A run, compile id or artifact that is not in the store."""
