"""Typed errors of the review: bad SPEC strings and windows (the CLI's exit status 2)."""
from __future__ import annotations

from ingest.errors import CompileWatchError


class SpecError(CompileWatchError):
    """A --baseline / --candidate SPEC or a --since window that cannot be read."""

    hint = ("SPEC is KEY=VALUE, repeatable or comma-separated, KEY one of label, torch, commit, run, "
            "hardware, model (e.g. --baseline label=v1 --candidate label=v2,model=llama)")
