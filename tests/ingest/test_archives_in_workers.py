"""With parse workers, an archive is unpacked by the worker that parses its files (ingest/workers.py,
units.Packed), not by the writing process before the first parse. The result table, its order and
what is stored stay those of one process unpacking everything first: on real bundles as .tar.gz
and .zip, damaged and cut archives, empty ones, nested ones, one archive of many bundles (its files
handed back to be parsed one per worker), and folders that hold nothing but an empty archive."""
from __future__ import annotations

import gzip
import shutil
import tarfile
from pathlib import Path

import pytest
from stored_tables import rows_in_order
from test_hostile_inputs import _damage, _zip_of_bundle   # the same damaged and zipped bundles

from compilewatch.ingest import archives
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.records import EVENT_TABLES
from compilewatch.ingest.workers import PARSED_WITH_ARCHIVE
from compilewatch.store import open_store

pytestmark = pytest.mark.usefixtures("pool_for_small_inputs")

REPO = Path(__file__).resolve().parents[2]
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
TEXT_LOG = REPO / "tests" / "fixtures" / "text" / "torch2.13_all.log"


def _empty_tar(dest: Path) -> Path:
    with tarfile.open(dest, "w:gz"):
        pass
    return dest


def _tar_of(members: list[Path], dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        for m in members:
            tf.add(m, arcname=m.name)
    return dest


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    if len(BUNDLES) < 5:
        pytest.skip("sample_logs/cpu-torch2.13 has fewer than 5 bundles")
    root = tmp_path_factory.mktemp("archives")
    drop = root / "drop"
    drop.mkdir()
    shutil.copy(BUNDLES[0], drop / "a.tar.gz")
    _zip_of_bundle(BUNDLES[1], drop / "b.zip")
    shutil.copy(TEXT_LOG, drop / "loose.log")
    (drop / "bad.zip").write_bytes(_damage(_zip_of_bundle(BUNDLES[2], root / "m.zip").read_bytes(), 0.3, 400))
    (drop / "cut.tar.gz").write_bytes(BUNDLES[2].read_bytes()[:5000])
    (drop / "flipped.tar.gz").write_bytes(_damage(BUNDLES[3].read_bytes(), 0.5, 64))
    _empty_tar(drop / "empty.tar.gz")
    (drop / "small.log.gz").write_bytes(gzip.compress(TEXT_LOG.read_bytes()[:20000]))
    # an archive holding an archive of a bundle: unpacked, inner one too, in the worker
    _tar_of([_tar_of([BUNDLES[3]], root / "inner.tar.gz")], drop / "nested.tar.gz")
    # one archive of many bundles: more files than one worker parses with the archive
    many = _tar_of(BUNDLES[:5], root / "many.tar.gz")
    shutil.copy(many, drop / "many.tar.gz")
    hollow = root / "hollow"   # a folder with nothing but an empty archive in it
    hollow.mkdir()
    _empty_tar(hollow / "nothing.tar.gz")
    lone = _empty_tar(root / "lone-empty.tar.gz")   # an empty archive named on its own
    return [drop, hollow, lone, BUNDLES[4]]


@pytest.fixture
def unpacked_here(monkeypatch) -> list[str]:
    """The names of the archives this process unpacks (a worker's unpacking is not seen here)."""
    names: list[str] = []
    extract = archives.extract
    monkeypatch.setattr(archives, "extract", lambda p, *a, **k: names.append(Path(p).name) or extract(p, *a, **k))
    return names


def _ingest(db: Path, paths: list[Path], workers: int):
    store = open_store(db)
    report = ingest_paths(store, paths, workers=workers)
    table = [(f.name, f.kind, f.status, f.records, f.errors, f.message, f.bad_input, f.run_id) for f in report.files]
    tables = {}
    with store.read() as con:
        for t in (*EVENT_TABLES, "ingest_errors"):
            tables[t] = rows_in_order(con, t)
        tables["files"] = con.execute(
            "SELECT file_id, run_id, sha256, kind, original_name, status, records, errors FROM files ORDER BY file_id"
        ).fetchall()
        tables["runs"] = con.execute("SELECT run_id, model, label, source FROM runs ORDER BY run_id").fetchall()
    return table, tables


def test_archives_unpacked_by_the_workers_give_one_process_results(inputs, tmp_path, unpacked_here):
    one_table, one_tables = _ingest(tmp_path / "one" / "cw.duckdb", inputs, workers=1)
    assert "a.tar.gz" in unpacked_here and "many.tar.gz" in unpacked_here
    unpacked_here.clear()
    two_table, two_tables = _ingest(tmp_path / "two" / "cw.duckdb", inputs, workers=2)
    assert unpacked_here == [], "with workers, the writing process unpacked archives itself"

    assert two_table == one_table
    for t in one_tables:
        assert two_tables[t] == one_tables[t], f"{t}: rows differ when archives are unpacked in workers"

    by = {name: (status, message) for name, _, status, _, _, message, _, _ in one_table}
    assert by["drop/bad.zip"][0] == by["drop/cut.tar.gz"][0] == by["drop/flipped.tar.gz"][0] == "failed"
    assert by["hollow"] == ("failed", "the folder holds no files to ingest")
    assert by["lone-empty.tar.gz"] == ("failed", "the archive holds no files to ingest")
    many = [name for name in by if name.startswith("drop/many.tar.gz/")]
    assert len(many) > PARSED_WITH_ARCHIVE and all(by[n][0] in ("stored", "duplicate") for n in many)
    nested = [name for name in by if name.startswith("drop/nested.tar.gz/")]   # many.tar.gz holds it too
    assert nested and all(by[n][0] == "duplicate" for n in nested)
    assert one_tables["graph_breaks"] and one_tables["recompiles"]


def test_one_archive_alone_is_unpacked_here_and_its_files_parsed_on_every_core(tmp_path, unpacked_here):
    """Named alone, an archive of many bundles is unpacked by the writing process, so that its
    files go to the workers one by one, as before."""
    if len(BUNDLES) < 3:
        pytest.skip("sample_logs/cpu-torch2.13 has fewer than 3 bundles")
    many = _tar_of(BUNDLES[:3], tmp_path / "many.tar.gz")
    two_table, two_tables = _ingest(tmp_path / "two" / "cw.duckdb", [many], workers=2)
    assert unpacked_here == ["many.tar.gz", *(b.name for b in BUNDLES[:3])]   # the bundles inside it too
    one_table, one_tables = _ingest(tmp_path / "one" / "cw.duckdb", [many], workers=1)
    assert two_table == one_table and two_tables == one_tables
    assert sum(status == "stored" for _, _, status, *_ in one_table) >= 3 * 4
