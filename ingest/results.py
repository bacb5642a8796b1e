"""What an ingest did, file by file: the report the CLI, the Upload page and the inbox show."""
from __future__ import annotations

import io
from dataclasses import dataclass, field

STORED, PARTIAL, DUPLICATE, FAILED, SKIPPED = "stored", "partial", "duplicate", "failed", "skipped"
UNREADABLE = "cannot read"      # the message of a file that failed before anything in it was read


def unreadable(e: OSError) -> str:
    """What a file that could not be read gets as its message, and what to do where it says."""
    if isinstance(e, io.UnsupportedOperation):   # `ingest <(zcat log.gz)`: a pipe reads only once
        return (f"{UNREADABLE}: not a regular file (a pipe?): ingest reads a file more than once; "
                "save it to a file first (.gz, .zip and .tar.gz are read as they are)")
    return f"{UNREADABLE}: {e.strerror or e}"


@dataclass
class FileResult:
    name: str
    kind: str
    status: str                     # stored | partial | duplicate | failed | skipped
    run_id: str | None = None
    records: dict = field(default_factory=dict)
    errors: int = 0
    message: str = ""
    sha256: str | None = None
    size_bytes: int = 0
    # The input was bad (missing, or not a log) rather than the store failing: the CLI exits 2.
    bad_input: bool = False
    # Commits of this file's rows run again because another host's commit conflicted (a team store
    # with many writers; store.files.transactions backs off between them).
    retries: int = 0

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def errors(self) -> int:
        return sum(f.errors for f in self.files)

    @property
    def retries(self) -> int:
        return sum(f.retries for f in self.files)

    @property
    def ok(self) -> bool:
        return not any(f.status == FAILED for f in self.files)

    @property
    def bad_input(self) -> list[FileResult]:
        """Inputs named explicitly that were refused: missing, or not a log."""
        return [f for f in self.files if f.status == FAILED and f.bad_input]
