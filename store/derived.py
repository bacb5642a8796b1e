"""Per-run facts derived from a run's stored rows: its hardware (store/hardware.py), its
metrics (store/run_metrics.py) and its rollups (store/rollups.py). Refreshed inside the ingest
transaction of each of the run's files, after a reingest, and for every stored run when the
migration that added them is applied."""
from __future__ import annotations

from compilewatch.store.hardware import refresh_hardware
from compilewatch.store.rollups import refresh_rollups
from compilewatch.store.run_metrics import refresh_run_metrics

# Migrations after which every stored run's derived facts are rebuilt (same transaction): the newest
# migration whose tables the derived SQL reads. A store migrated from further back gets its backfill
# once, after that one (an earlier backfill would read tables not created yet).
BACKFILL_AFTER = {"009_rollups_review.sql"}


def refresh_run(con, run_id: str) -> None:
    refresh_hardware(con, run_id)
    refresh_run_metrics(con, run_id)
    refresh_rollups(con, run_id)


def refresh_all(con) -> None:
    """Set-based, for every run at once: a team-year store backfills in seconds, not per run."""
    refresh_hardware(con)
    refresh_run_metrics(con)
    refresh_rollups(con)


def after_migration(con, name: str) -> None:
    if name in BACKFILL_AFTER:
        refresh_all(con)
