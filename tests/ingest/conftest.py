from __future__ import annotations

import pytest


@pytest.fixture
def pool_for_small_inputs(monkeypatch):
    """Parse workers whatever the inputs' size: the tests of the workers ingest a few MB of real
    logs, less than it takes for a worker's start to pay (workers.pool_pays_off)."""
    from compilewatch.ingest import workers
    monkeypatch.setattr(workers, "POOL_MIN_BYTES", 0)
