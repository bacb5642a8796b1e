"""Where a run is placed: its time and its hardware key, as every page, the review and the day
rollups (store/day_rollups.py) read them from the ``runs`` row ``r``."""
from __future__ import annotations

# A run's time: when it started, or when it was ingested for loose logs that do not say.
RUN_TIME = "coalesce(r.started_at, r.ingested_at)"
# The hardware key ingest derives for every run (store/hardware.py); a run it could not tell is
# "unknown", a group of its own.
HARDWARE = "coalesce(r.hardware, 'unknown')"
