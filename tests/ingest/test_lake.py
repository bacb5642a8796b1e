"""The DuckLake team store against a real PostgreSQL (tests/conftest.py starts one): the migrations,
the same data and page output as the embedded store, and "each file once" under racing processes
and a worker killed mid-ingest."""
from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest

from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from compilewatch.store.files import migrations
from compilewatch.store.lake import ducklake_sql

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
SUBGRAPHS = sorted((REPO / "tests" / "fixtures" / "trace" / "tlparse").glob("*.log"))   # vLLM pieces, regions
TIMESTAMPS = {"ingested_at", "applied_at"}
# filled with any_value(...) in app/queries: which member of a group is shown depends on storage order
ARBITRARY_PICKS = {"example", "example_stack", "raw", "user_stack", "reason", "location", "file", "line",
                   "explanation", "hints", "source_name", "expected", "actual", "limit_name", "top_guard",
                   "gb_type", "gb_code", "user_file", "user_line", "user_function", "label"}


def tables(con) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
        "AND table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1").fetchall()]


def columns(con, table: str) -> list[tuple[str, str]]:
    return [tuple(r) for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_name = ? ORDER BY ordinal_position", [table]).fetchall()]


def snapshot(con, table: str) -> pd.DataFrame:
    """The table's rows, sorted; a rollup's any_value() picks left out: which member of a group a
    rollup keeps as its example depends on the order its source rows were stored and refreshed in."""
    dropped = TIMESTAMPS | (ARBITRARY_PICKS if table.startswith("rollup_") else set())
    typed = [(c, t) for c, t in columns(con, table) if c not in dropped]
    cols = [c for c, _ in typed]
    # bytes compare, not sort; a list (rollup_week_bench's labels) sorts as its text
    exprs = [f"hex({c}) AS {c}" if t == "BLOB" else f"{c}::VARCHAR AS {c}" if t.endswith("[]") else c
             for c, t in typed]
    frame = con.execute(f"SELECT {', '.join(exprs)} FROM {table}").df()
    if "payload_z" in frame:   # the payload, not deflate's encoding of it (stored_tables.read_back)
        frame["payload_z"] = [zlib.decompress(bytes.fromhex(x)).hex() if isinstance(x, str) else x
                              for x in frame["payload_z"]]
    return frame.sort_values(cols).reset_index(drop=True) if len(frame) else frame


def test_ducklake_sql_drops_what_ducklake_lacks():
    sql = ducklake_sql(dict(migrations())["001_initial.sql"])
    assert "PRIMARY KEY" not in sql and "UNIQUE" not in sql and "SEQUENCE" not in sql
    assert "run_id          VARCHAR NOT NULL" in sql  # NOT NULL and defaults stay
    assert "DEFAULT current_timestamp" in sql


def test_every_migration_applies_on_ducklake(lake_store, tmp_path):
    """Every migration file runs on DuckLake and yields the embedded schema, column for column; a
    later migration that DuckLake cannot take fails here."""
    embedded = open_store(tmp_path / "emb" / "cw.duckdb")
    with lake_store.read() as lake, embedded.read() as emb:
        assert sorted(r[0] for r in lake.execute("SELECT name FROM _migrations").fetchall()) == [n for n, _ in migrations()]
        assert tables(lake) == tables(emb)
        for t in tables(emb):
            assert columns(lake, t) == columns(emb, t), t
        views = "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal ORDER BY 1"
        assert lake.execute(views).fetchall() == emb.execute(views).fetchall()
    # opening again (another host starting) applies nothing twice
    assert open_store(lake_store.spec, lake_store.folder).migrate() == []


def _page_queries():
    """Every query function the pages use: (name, fn)."""
    import compilewatch.app.queries as q
    out = []
    for mod in sorted(q.__all__ if hasattr(q, "__all__") else []) or ["common", "compare", "hotspots", "overview",
                                                                         "recompiles", "run_detail", "speedups"]:
        m = importlib.import_module(f"compilewatch.app.queries.{mod}")
        for name, fn in inspect.getmembers(m, inspect.isfunction):
            if fn.__module__ == m.__name__ and not name.startswith("_") and list(inspect.signature(fn).parameters)[:2] == ["con", "f"]:
                out.append((f"{mod}.{name}", fn))
    return out


def same_tables_as_embedded(lake, inputs, folder: Path):
    """Ingest `inputs` into `lake` and into a new embedded store under `folder`: every table holds
    the same rows in both. Returns the embedded store."""
    embedded = open_store(folder / "emb" / "cw.duckdb")
    for store in (embedded, lake):
        report = ingest_paths(store, inputs)
        assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    with embedded.read() as emb, lake.read() as con:
        assert tables(con) == tables(emb)
        for t in tables(emb):
            a, b = snapshot(emb, t), snapshot(con, t)
            assert len(a) == len(b), t
            pd.testing.assert_frame_equal(a, b, check_dtype=False, obj=t)
    return embedded


def test_same_inputs_same_tables_and_pages(lake_store, tmp_path):
    embedded = same_tables_as_embedded(lake_store, [TRACE, *TEXTS, *BUNDLES, *SUBGRAPHS], tmp_path)
    from compilewatch.app.filters import Filters
    with embedded.read() as emb, lake_store.read() as lake:
        assert emb.execute("SELECT count(*) FROM graph_breaks").fetchall()[0][0] > 0
        assert emb.execute("SELECT count(*) FROM piecewise_compiles").fetchall()[0][0] > 0
        run = emb.execute("SELECT run_id FROM runs ORDER BY run_id LIMIT 1").fetchall()[0][0]
        queries = _page_queries()
        assert len(queries) > 20
        for f in (Filters(start=None, end=None), Filters(run_id=run)):
            for name, fn in queries:
                a, b = fn(emb, f), fn(lake, f)
                if isinstance(a, pd.DataFrame):
                    assert list(a.columns) == list(b.columns) and len(a) == len(b), name
                    # Columns a query fills with any_value() (an example per group) may show another
                    # member of the group; everything else must match, rows tied under the query's
                    # ORDER BY in either order.
                    keep = [c for c in a.columns if c not in ARBITRARY_PICKS | TIMESTAMPS]
                    pd.testing.assert_frame_equal(_rows(a[keep]), _rows(b[keep]), check_dtype=False, obj=name)
                else:
                    assert a == b, name


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return frame.reset_index(drop=True)
    key = frame.astype(str)
    return frame.loc[key.sort_values(list(key.columns)).index].reset_index(drop=True)


def _cli(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "compilewatch", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _env(store):
    return {**os.environ, "COMPILEWATCH_DB": store.spec, "COMPILEWATCH_DATA_PATH": str(store.folder)}


def test_four_racing_ingests_and_reingests_store_each_file_once(lake_store):
    """Four processes ingest overlapping inputs at once, then two re-ingest everything: every file and
    run is stored once, with exactly its rows; the others are told "duplicate"."""
    inputs = [TRACE, *TEXTS, *BUNDLES]
    env = _env(lake_store)
    sets = [inputs, inputs[::-1], inputs[1:] + inputs[:1], inputs]
    procs = [_cli(["ingest", "--quiet", *map(str, s)], env) for s in sets]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    again = [_cli(["ingest", "--quiet", *map(str, inputs)], env) for _ in range(2)]
    outs2 = [p.communicate(timeout=600) for p in again]
    assert all(p.returncode == 0 for p in again), outs2
    totals = [tuple(map(int, re.search(r"^(\d+) stored, (\d+) duplicate, (\d+) failed", o[0], re.M).groups()))
              for o in outs + outs2]
    with lake_store.read() as con:
        n_files = con.execute("SELECT count(*) FROM files").fetchall()[0][0]
        per_key = con.execute("SELECT max(n) FROM (SELECT count(*) n FROM files GROUP BY run_id, sha256)").fetchall()[0][0]
        runs, distinct_runs = con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchall()[0]
        ids = con.execute("SELECT count(DISTINCT file_id) FROM files").fetchall()[0][0]
    assert per_key == 1 and ids == n_files
    assert runs == distinct_runs == 1 + len(TEXTS) + len(BUNDLES)
    assert sum(t[0] for t in totals) == n_files          # each stored by exactly one process
    assert sum(t[1] for t in totals) == 5 * n_files      # and a duplicate for the five others
    assert all(t[2] == 0 for t in totals)
    _assert_rows_match_files(lake_store)


def _assert_rows_match_files(store):
    """Every files row's `records` equals the rows stored under its file_id: nothing half-stored."""
    from compilewatch.ingest.records import EVENT_TABLES
    with store.read() as con:
        union = " UNION ALL ".join(f"SELECT file_id FROM {t}" for t in EVENT_TABLES)
        bad = con.execute(
            f"SELECT f.file_id, f.records, count(e.file_id) FROM files f LEFT JOIN ({union}) e USING (file_id) "
            "GROUP BY ALL HAVING f.records <> count(e.file_id)").fetchall()
        orphans = con.execute(f"SELECT count(*) FROM ({union}) e WHERE file_id NOT IN (SELECT file_id FROM files)").fetchall()[0][0]
    assert bad == [] and orphans == 0


def test_worker_killed_mid_ingest_leaves_nothing_half_stored(lake_store, tmp_path):
    """SIGKILL a worker while it ingests (some files committed, one in flight with its claims held):
    nothing of the in-flight file is stored, its claims die with its connection, and a retry stores
    exactly what a clean ingest stores."""
    inputs = [*BUNDLES, TRACE, *TEXTS]
    env = _env(lake_store)
    worker = _cli(["ingest", "--quiet", *map(str, inputs)], env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with lake_store.read() as con:
            if con.execute("SELECT count(*) FROM files").fetchall()[0][0] >= 2:
                break
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with lake_store.read() as con:
        stored_before = con.execute("SELECT count(*) FROM files").fetchall()[0][0]
    _assert_rows_match_files(lake_store)
    # the retry must not wait on the dead worker's claims, and must not store anything twice
    retry = _cli(["ingest", "--quiet", *map(str, inputs)], env)
    out, err = retry.communicate(timeout=600)
    assert retry.returncode == 0, (out, err)
    clean = open_store(tmp_path / "clean" / "cw.duckdb")
    assert ingest_paths(clean, inputs).ok
    with lake_store.read() as lake, clean.read() as emb:
        for t in tables(emb):
            assert lake.execute(f"SELECT count(*) FROM {t}").fetchall() == emb.execute(f"SELECT count(*) FROM {t}").fetchall(), t
        n = lake.execute("SELECT count(*) FROM files").fetchall()[0][0]
    assert 2 <= stored_before < n
    _assert_rows_match_files(lake_store)


def test_postgres_down_is_a_clear_error_and_reads_recover(postgres, lake_store):
    assert ingest_paths(lake_store, [TRACE]).ok
    postgres.stop("fast")
    try:
        from compilewatch.core.errors import StoreError
        with pytest.raises(StoreError) as e:
            with lake_store.read() as con:
                con.execute("SELECT count(*) FROM runs").fetchall()
        assert "cannot reach the team store's PostgreSQL" in e.value.title
        assert "127.0.0.1" in e.value.title
    finally:
        postgres.start(postgres.port)
    with lake_store.read() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 1


def _run_cli(args, env=None):
    return subprocess.run([sys.executable, "-m", "compilewatch", *args], cwd=REPO, env=env or os.environ.copy(),
                          capture_output=True, text=True, timeout=600)


def test_stats_and_store_copy_both_ways(lake_spec, lake_data_path, postgres, tmp_path):
    """embedded -> DuckLake -> a second embedded file: every table's count (from `stats --json`) equal
    at each step, raw files along, and the next ingest into a copy gets a fresh file id. With the
    lake's data path in a folder and on object storage (tests/conftest.py)."""
    first = tmp_path / "first" / "cw.duckdb"
    assert ingest_paths(open_store(first), [TRACE, *BUNDLES[:2]]).ok
    r = _run_cli(["stats", "--db", str(first), "--json"])
    assert r.returncode == 0, r.stderr
    before = json.loads(r.stdout)
    assert before["backend"] == "duckdb" and before["schema_version"] >= 1 and before["runs"] == 3
    assert before["files"] > 0 and before["size_on_disk"]["raw_bytes"] > 0
    assert {"runs_by_model", "runs_by_hardware", "runs_by_torch_version"} <= set(before)

    data = lake_data_path
    r = _run_cli(["store", "copy", "--from", str(first), "--to", lake_spec, "--to-data-path", str(data)])
    assert r.returncode == 0, r.stderr
    assert "DIFFERS" not in r.stdout
    r = _run_cli(["stats", "--db", lake_spec, "--data-path", str(data), "--json"])
    assert r.returncode == 0, r.stderr
    lake = json.loads(r.stdout)
    assert lake["backend"] == "ducklake"
    tables = [t for t in before if isinstance(before[t], int) and t not in ("schema_version", "_migrations")]
    assert {t: lake[t] for t in tables} == {t: before[t] for t in tables}
    assert lake["size_on_disk"]["raw_bytes"] == before["size_on_disk"]["raw_bytes"]

    # a second copy into a store that holds runs is refused, and changes nothing
    r = _run_cli(["store", "copy", "--from", str(first), "--to", lake_spec, "--to-data-path", str(data)])
    assert r.returncode == 2 and "already holds runs" in r.stderr

    back = tmp_path / "back" / "cw.duckdb"
    r = _run_cli(["store", "copy", "--from", lake_spec, "--from-data-path", str(data), "--to", str(back)])
    assert r.returncode == 0, r.stderr
    again = json.loads(_run_cli(["stats", "--db", str(back), "--json"]).stdout)
    assert {t: again[t] for t in tables} == {t: before[t] for t in tables}
    assert again["size_on_disk"]["raw_bytes"] == before["size_on_disk"]["raw_bytes"]

    for db, dp in ((lake_spec, data), (back, None)):
        store = open_store(db, dp)
        with store.read() as con:
            top = con.execute("SELECT max(file_id) FROM files").fetchall()[0][0]
        assert ingest_paths(store, [TEXTS[0]]).ok
        with store.read() as con:
            n, distinct = con.execute("SELECT count(*), count(DISTINCT file_id) FROM files").fetchall()[0]
            assert con.execute("SELECT count(*) FROM files WHERE file_id > ?", [top]).fetchall()[0][0] == 1
        assert n == distinct


def inbox_workers(env: dict, settled, workers: int = 3, timeout_s: float = 600) -> list[str]:
    """Run `inbox --watch` workers (as on as many hosts) until settled() says every entry is, then
    stop them with SIGINT; returns what each printed."""
    procs = [_cli(["inbox", "--watch", "--interval", "0.2"], env) for _ in range(workers)]
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if settled():
                break
            assert all(w.poll() is None for w in procs), [w.communicate() for w in procs]
            time.sleep(0.2)
    finally:
        for w in procs:
            w.send_signal(signal.SIGINT)
        outs = [w.communicate(timeout=120)[0] for w in procs]
    return outs


def test_inbox_workers_on_one_lake_claim_each_bundle_once(lake_store):
    """Three `inbox --watch` workers (as on three hosts) on one DuckLake store: every bundle dropped
    into the shared inbox is ingested by one of them, once; a re-sent copy is a duplicate."""
    import shutil
    inbox = lake_store.inbox_dir
    inbox.mkdir(parents=True, exist_ok=True)
    bundles = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
    for b in bundles:
        shutil.copy(b, inbox / f".{b.name}")
        (inbox / f".{b.name}").rename(inbox / b.name)       # the writers' protocol: rename into place
    shutil.copy(bundles[0], inbox / f"resent-{bundles[0].name}")
    env = _env(lake_store)
    done = inbox / "done"
    outs = inbox_workers(env, lambda: done.is_dir() and len(
        [p for p in done.iterdir() if p.name.endswith(".tar.gz")]) == len(bundles) + 1)
    assert sorted(p.name for p in done.iterdir()) == sorted([b.name for b in bundles] + [f"resent-{bundles[0].name}"])
    assert not (inbox / "failed").exists() or not any((inbox / "failed").iterdir())
    lines = [ln for o in outs for ln in o.splitlines() if ln.endswith(" failed")]
    assert len(lines) == len(bundles) + 1, outs           # each entry handled by exactly one worker
    assert sum(1 for w_out in outs if ".tar.gz:" in w_out) >= 2  # and the work was shared
    assert any(ln.startswith("resent-") and " 0 stored" in ln for ln in lines)
    with lake_store.read() as con:
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchall()[0] == (len(bundles), len(bundles))
        assert con.execute("SELECT count(*) = count(DISTINCT (run_id, sha256)) FROM files").fetchall()[0][0]
    _assert_rows_match_files(lake_store)


def test_reingest_on_ducklake_replaces_rows_once(lake_store):
    from compilewatch.ingest.reingest import reingest
    assert ingest_paths(lake_store, [TRACE, TEXTS[0]]).ok
    with lake_store.read() as con:
        before = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables(con)}
    assert reingest(lake_store, all_files=True) == 2
    with lake_store.read() as con:
        after = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables(con)}
    assert after == before and before["graph_breaks"] > 0
    _assert_rows_match_files(lake_store)


def test_a_page_render_reads_one_snapshot_and_writes_nothing(lake_store, lake_spec, tmp_path):
    """A render's reads (reads_held) are one read-only DuckLake transaction: another host's commit
    during the render is seen by the next render, not by the render's later queries (whose cache
    entries are keyed on the version it read first), and a write through the render's cursor is
    refused rather than kept or lost."""
    import duckdb

    assert ingest_paths(lake_store, [TEXTS[0]], run_id="first").ok
    other = open_store(lake_spec, tmp_path / "lake-data")   # another host's process
    try:
        with lake_store.reads_held():
            version = lake_store.data_version()
            with lake_store.read() as con:
                assert con.execute("SELECT run_id FROM runs").fetchall() == [("first",)]
            assert ingest_paths(other, [TEXTS[1]], run_id="second").ok
            with lake_store.read() as con:
                assert con.execute("SELECT run_id FROM runs").fetchall() == [("first",)]
                assert con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('lake')").fetchall()[0][0] \
                    == int(version)
                with pytest.raises(duckdb.TransactionException):
                    con.execute("DELETE FROM runs WHERE run_id = 'first'")
        assert lake_store.data_version() != version
        with lake_store.read() as con:
            assert con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall() == [("first",), ("second",)]
    finally:
        other.close()
