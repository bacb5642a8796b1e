"""Which rank wrote a file, read from its name: the one place that knows the naming.

torch names a distributed job's TORCH_TRACE files ``dedicated_log_torch_trace_rank_<N>_<random>.log``,
and the collector's hooks write ``timings.rank<N>.json`` beside rank 0's ``timings.json``
(ingest/bundle.py). The name is what tlparse's ``--all-ranks-html`` groups by, and it matters:
older traces carry no ``rank`` key in their envelopes at all, and some carry a wrong one (a
rank-5 file whose envelopes all say rank 1), so per-rank views prefer the name and fall back to
the rank the records carry.
"""
from __future__ import annotations

import re

# Group 1 is the rank; only the last path component counts. Queries pass the same pattern to
# DuckDB's regexp_extract (RE2 reads this syntax alike).
RANK_IN_NAME = r"(?:_rank_|\.rank)(\d+)[._][^/]*$"
_RANK_IN_NAME = re.compile(RANK_IN_NAME)


def rank_from_name(name: str | None) -> int | None:
    """The rank a file's name says it belongs to, or None when the name does not say."""
    if not name:
        return None
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None
