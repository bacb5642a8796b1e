"""What the store holds, for the upload page: the latest ingested files."""
from __future__ import annotations

import pandas as pd

from compilewatch.app.filters import Filters
from compilewatch.app.queries.common import df


def recent_files(con, f: Filters) -> pd.DataFrame:
    """The f.limit most recently ingested files with their run, status, records and errors."""
    return df(con, """
    SELECT f.ingested_at, f.original_name, f.kind, f.status, f.records, f.errors, f.size_bytes,
           f.run_id, r.model, r.label, r.torch_version
    FROM files f LEFT JOIN runs r USING (run_id)
    ORDER BY f.ingested_at DESC, f.file_id DESC LIMIT ?""", [int(f.limit)])
