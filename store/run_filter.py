"""The runs a refresh of derived facts covers (store/derived.py), as one SQL condition bound to $1.

A writer that keeps its connection across files refreshes all the runs it marked in one pass per
table instead of one pass per run (each statement costs about the same for one run as for fifty:
most of it is planning and scanning the column), so every refresh takes a list of run ids."""
from __future__ import annotations

from collections.abc import Sequence


def runs_match(run_ids: Sequence[str], column: str = "run_id") -> str:
    """True for the rows of `run_ids`, with runs_param(run_ids) as $1. One run is an equality,
    which DuckDB prunes row groups (and DuckLake data files) with. Several are a filter on the
    scan, not a join: ``IN (SELECT unnest($1))`` made each statement a semi join, and run_metrics'
    union of eleven of them ran out of the writer's 64 MB over the 92 sample runs."""
    if len(run_ids) == 1:
        return f"{column} = $1"
    return f"list_contains($1::VARCHAR[], {column})"


def runs_among(run_ids: Sequence[str], column: str = "run_id") -> str:
    """runs_match for a read given thousands of runs at once (a review's groups together): several
    runs are a semi join on the list, whose cost stays flat with its length, where list_contains
    tests each row against the whole list (minutes for a week's ~6,000 runs at 100,000 stored, the
    semi join ~1 s). Bound to runs_param(run_ids) as $1, like runs_match."""
    if len(run_ids) == 1:
        return runs_match(run_ids, column)
    return f"{column} IN (SELECT unnest($1::VARCHAR[]))"


def runs_param(run_ids: Sequence[str]):
    return run_ids[0] if len(run_ids) == 1 else list(run_ids)


# Runs summed per statement when every run is rebuilt (a migration's backfill, gen_team_year.py):
# one statement over a 100,000-run store ran out of DuckDB's memory (2 GB) while grouping its 11 M
# graph breaks, and what a statement cannot hold it spills to the temp directory (36 GB over a full
# rebuild of that store). A slice of runs by hash keeps each statement's groups, and so its memory and
# spill, the size of one slice's at any store size.
RUNS_PER_STATEMENT = 2000


def run_slices(con, column: str = "run_id") -> list[str]:
    """SQL conditions on ``column`` that split the stored runs into slices of about
    RUNS_PER_STATEMENT runs, each run in exactly one: what a rebuild of every run runs per statement."""
    runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    n = max(1, -(-runs // RUNS_PER_STATEMENT))
    return [f"hash({column}) % {n} = {i}" for i in range(n)]
