"""Parse workers start only where they pay (ingest/workers.py, pool_pays_off): a spawned worker
imports for ~0.3 s before it parses a byte, so a bundle or a few small files are
parsed by the writing process itself, with the same results; inputs with enough to parse still go
to the workers. What counts is the bytes to parse, an archive's or a gzipped log's unpacked."""
from __future__ import annotations

import gzip
import shutil
import zipfile
from pathlib import Path

import pytest
from test_hostile_inputs import _zip_of_bundle

from compilewatch.ingest import archives, workers
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.units import Unit, expand
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
TEXT_LOG = REPO / "tests" / "fixtures" / "text" / "torch2.13_all.log"


@pytest.fixture
def pool_starts(monkeypatch) -> list[int]:
    """How many files each ingest handed to parse workers (one entry per pool started)."""
    started: list[int] = []
    real = workers.ingest_in_workers

    def spy(store, units, *args, **kwargs):
        started.append(len(units))
        return real(store, units, *args, **kwargs)
    monkeypatch.setattr(workers, "ingest_in_workers", spy)
    return started


def _ingest(db: Path, paths: list[Path], n: int):
    report = ingest_paths(open_store(db), paths, workers=n)
    return [(f.name, f.kind, f.status, f.records, f.errors, f.message, f.run_id) for f in report.files]


def _drop(tmp_path: Path) -> Path:
    drop = tmp_path / "drop"
    drop.mkdir()
    for b in BUNDLES[:2]:
        shutil.copy(b, drop / b.name)
    shutil.copy(TEXT_LOG, drop / "loose.log")
    return drop


def test_a_bundle_or_a_few_small_files_are_parsed_by_the_writer(tmp_path, pool_starts):
    if len(BUNDLES) < 2:
        pytest.skip("sample_logs/cpu-torch2.13 has fewer than 2 bundles")
    drop = _drop(tmp_path)
    alone = _ingest(tmp_path / "one" / "cw.duckdb", [drop], 1)
    assert _ingest(tmp_path / "two" / "cw.duckdb", [drop], 2) == alone
    assert _ingest(tmp_path / "bundle" / "cw.duckdb", [BUNDLES[0]], 4)[0][2] == "stored"
    assert pool_starts == [], "parse workers started for less than POOL_MIN_BYTES to parse"
    assert sum(status == "stored" for _, _, status, *_ in alone) >= 2 * 4


def test_enough_to_parse_starts_the_workers_with_the_same_results(tmp_path, pool_starts, monkeypatch):
    if len(BUNDLES) < 2:
        pytest.skip("sample_logs/cpu-torch2.13 has fewer than 2 bundles")
    drop = _drop(tmp_path)
    units, _ = expand([drop], tmp_path / "tmp", unpack_archives=False)
    to_parse = sum(archives.unpacked_size(u.path) for u in units)
    monkeypatch.setattr(workers, "POOL_MIN_BYTES", to_parse + 1)
    alone = _ingest(tmp_path / "below" / "cw.duckdb", [drop], 2)
    assert pool_starts == []
    monkeypatch.setattr(workers, "POOL_MIN_BYTES", to_parse)
    assert _ingest(tmp_path / "at" / "cw.duckdb", [drop], 2) == alone
    assert pool_starts == [len(units)]   # the folder's two archives, left packed, and the loose log


def test_unpacked_size_reads_what_the_archive_says(tmp_path):
    if not BUNDLES:
        pytest.skip("sample_logs/cpu-torch2.13 has no bundles")
    tgz = BUNDLES[0]
    assert archives.unpacked_size(tgz) == len(gzip.decompress(tgz.read_bytes()))
    zipped = _zip_of_bundle(tgz, tmp_path / "b.zip")
    with zipfile.ZipFile(zipped) as zf:
        assert archives.unpacked_size(zipped) == sum(len(zf.read(i)) for i in zf.infolist())
    log_gz = tmp_path / "x.log.gz"
    log_gz.write_bytes(gzip.compress(TEXT_LOG.read_bytes()))
    assert archives.unpacked_size(log_gz) == TEXT_LOG.stat().st_size
    assert archives.unpacked_size(TEXT_LOG) == TEXT_LOG.stat().st_size
    damaged = tmp_path / "bad.zip"
    damaged.write_bytes(b"PK\x03\x04 not really a zip")
    assert archives.unpacked_size(damaged) == damaged.stat().st_size   # refused later, when unpacked
    assert archives.unpacked_size(tmp_path / "gone.tar.gz") == 0
    assert workers.pool_pays_off([Unit(tgz, tgz.name)]) is (archives.unpacked_size(tgz) >= workers.POOL_MIN_BYTES)
