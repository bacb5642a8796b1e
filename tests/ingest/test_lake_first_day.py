"""A brand-new team store on its first day: many hosts start on it at once, and what fails says what
actually failed. Real PostgreSQL (tests/conftest.py), real `compilewatch ingest` processes."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.core.errors import SchemaNewerError, StoreLoginError, StoreUnreachableError
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store
from compilewatch.store.pglocal import free_port

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXTS = sorted((REPO / "tests" / "fixtures" / "text").glob("torch2.13_*.log"))
BUNDLES = sorted((REPO / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))[:3]
WORKERS = 6


def test_hosts_starting_together_on_a_brand_new_store_all_succeed(lake_spec, tmp_path):
    """Six processes are started at the same instant on a catalog database nobody has opened: each
    must create-or-find the catalog and the migrations (under PostgreSQL's advisory lock), and
    together they must store exactly what one embedded ingest of the same files stores."""
    inputs = [TRACE, *TEXTS, *BUNDLES]
    data = tmp_path / "lake-data"
    env = {**os.environ, "COMPILEWATCH_DB": lake_spec, "COMPILEWATCH_DATA_PATH": str(data)}
    # Each worker takes the inputs in another order, and every worker ingests all of them: the
    # catalog's creation races first, then each file's "stored once" claim.
    orders = [inputs[i:] + inputs[:i] for i in range(WORKERS)]
    procs = [subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", "--quiet", *map(str, order)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for order in orders]
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0] * WORKERS, [o[1][-500:] for o in outs]
    stored = [int(re.search(r"^(\d+) stored", o[0], re.M).group(1)) for o in outs]

    lake = open_store(lake_spec, data)
    embedded = open_store(tmp_path / "emb" / "cw.duckdb")
    assert ingest_paths(embedded, inputs).ok
    with embedded.read() as con:
        assert sum(stored) == con.execute("SELECT count(*) FROM files").fetchall()[0][0]  # each file by one worker
    with lake.read() as lcon, embedded.read() as econ:
        event_tables = [r[0] for r in econ.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' AND table_name NOT IN ('_migrations') ORDER BY 1").fetchall()]
        for t in event_tables:
            assert (lcon.execute(f"SELECT count(*) FROM {t}").fetchall()
                    == econ.execute(f"SELECT count(*) FROM {t}").fetchall()), t
        migrations = lcon.execute("SELECT name, count(*) FROM _migrations GROUP BY name HAVING count(*) > 1").fetchall()
    assert migrations == []                   # no migration applied twice by racing hosts
    lake.close()


def test_unreachable_server_is_its_own_message(tmp_path):
    port = free_port()   # nothing listens there
    with pytest.raises(StoreUnreachableError) as e:
        open_store(f"ducklake:postgres:dbname=cw host=127.0.0.1 port={port} user=postgres connect_timeout=5",
                   tmp_path / "d")
    assert f"127.0.0.1:{port}" in e.value.title and "cannot reach" in e.value.title
    assert "running" in e.value.hint


def test_refused_login_is_its_own_message(postgres, tmp_path):
    with pytest.raises(StoreLoginError) as e:
        open_store(f"ducklake:postgres:dbname=compilewatch host=127.0.0.1 port={postgres.port} user=nobody_here",
                   tmp_path / "d")
    assert "refused" in e.value.title and "nobody_here" in e.value.title
    assert "user=" in e.value.hint


def test_a_store_from_a_newer_compilewatch_is_refused_on_both_backends(lake_store, tmp_path):
    embedded = open_store(tmp_path / "emb" / "cw.duckdb")
    for store in (embedded, lake_store):
        with store.write() as con:
            con.execute("INSERT INTO _migrations (name) VALUES ('999_from_the_future.sql')")
        with pytest.raises(SchemaNewerError) as e:
            store.migrate()
        assert "999_from_the_future.sql" in e.value.title and "upgrade" in e.value.hint
