"""A store of sample_logs/ (real H200 torch 2.11 and CPU torch 2.13 / 2.14.1 bundles) for the review tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def samples_db(tmp_path_factory) -> Path:
    from compilewatch.ingest.loader import ingest_paths

    folders = [REPO / "sample_logs" / d for d in ("gpu-h200-torch2.11", "cpu-torch2.13", "cpu-torch2.14.1")]
    paths = sorted(p for d in folders if d.exists() for p in d.glob("*.tar.gz"))
    if not paths:
        pytest.skip("sample_logs/ holds no bundles")
    path = tmp_path_factory.mktemp("review-samples") / "compilewatch.duckdb"
    report = ingest_paths(open_store(path), paths)
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    return path


@pytest.fixture
def samples_con(samples_db):
    with open_store(samples_db).read() as con:
        yield con
