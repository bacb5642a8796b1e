"""A process that multiprocessing spawns from the dashboard's process does not run the dashboard.

Streamlit runs app/main.py as the process's __main__ module (so does AppTest) and leaves it there;
multiprocessing's spawn re-runs the parent's main script in every child it starts, as __mp_main__.
Without main.py's guard, each spawned worker opened the store (ingesting the sample logs into a new
one first) and rendered a page before doing its own work: a writer started that way took minutes.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys


def _child(q) -> None:
    q.put(os.getpid())


def test_a_process_spawned_after_a_page_ran_does_not_open_the_store(app_at, real_db, tmp_path, monkeypatch):
    app_at(real_db, "views/upload.py")
    assert str(getattr(sys.modules["__main__"], "__file__", "")).endswith("main.py")   # what spawn re-runs
    fresh = tmp_path / "never-opened" / "cw.duckdb"
    monkeypatch.setenv("COMPILEWATCH_DB", str(fresh))
    monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "1")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(120)
    assert p.exitcode == 0 and q.get(timeout=5) == p.pid
    assert not fresh.parent.exists(), "the spawned process opened the dashboard's store"
