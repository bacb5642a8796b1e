"""App-level behaviour around the store: the DB path from secrets, the first-start sample_logs
ingest, a failing query shown as st.error (the rest of the page still renders), raw downloads,
and archive uploads."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import duckdb
from conftest import MAIN
from streamlit.testing.v1 import AppTest

from compilewatch.store import open_store

from rendered import shown

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACE = FIXTURES / "trace" / "graph_break_recompile.log.gz"


def test_db_path_from_secrets(monkeypatch, team_db):
    monkeypatch.delenv("COMPILEWATCH_DB", raising=False)
    monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "0")
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.secrets["compilewatch"] = {"db": str(team_db)}
    at.run()
    assert not at.exception
    assert [m.label for m in at.metric][0] == "Runs" and at.metric[0].value != "0"


def test_first_start_ingests_sample_logs(monkeypatch, tmp_path):
    samples = tmp_path / "sample_logs"
    samples.mkdir()
    (samples / TRACE.name).write_bytes(TRACE.read_bytes())
    monkeypatch.setenv("COMPILEWATCH_DB", str(tmp_path / "store" / "compilewatch.duckdb"))
    monkeypatch.setenv("COMPILEWATCH_SAMPLE_LOGS", str(samples))
    monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "1")
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception and not at.error
    assert "No runs in the database yet" not in "\n".join(i.value for i in at.info)
    at.switch_page("views/hotspots.py").run()
    assert any("item()" in str(w) for w in at.dataframe[0].value["what"])


def test_a_failing_query_is_an_error_message_not_a_crash(monkeypatch, tmp_path, team_db):
    db = tmp_path / "broken" / "compilewatch.duckdb"
    db.parent.mkdir()
    db.write_bytes(team_db.read_bytes())
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE bench_results")  # e.g. a store from an incompatible build
    con.close()
    monkeypatch.setenv("COMPILEWATCH_DB", str(db))
    monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "0")
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception
    assert any("bench_results" in shown(e.value) for e in at.error)
    assert any(d.value is not None for d in at.dataframe)   # the hotspot and storm tables still render


def test_run_detail_offers_the_raw_file(app_at, real_db):
    with open_store(real_db).read() as con:
        run_id = con.execute("SELECT run_id FROM files WHERE original_name = ?", [TRACE.name]).fetchone()[0]
    at = app_at(real_db, "views/run_detail.py", query={"run": run_id, "from": "2000-01-01", "to": "2100-01-01"})
    assert not at.exception and not at.error
    labels = [b.label for b in at.get("download_button")]
    assert any(TRACE.name in shown(label) for label in labels), labels


def test_upload_a_zip_bundle_of_loose_logs(app_at, tmp_path):
    db = tmp_path / "zip" / "compilewatch.duckdb"
    open_store(db)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("logs/" + TRACE.name, TRACE.read_bytes())
        zf.writestr("logs/" + "recompile_limit.log.gz", (FIXTURES / "trace" / "recompile_limit.log.gz").read_bytes())
    at = app_at(db, "views/upload.py")
    at.file_uploader(key="up_files").upload("two_runs.zip", buf.getvalue(), "application/zip")
    at.run()
    at.button(key="up_go").click().run()
    assert not at.exception and not at.error
    result = [d.value for d in at.dataframe if "duplicate" in d.value.columns][0]
    assert len(result) == 2 and set(result["status"]) == {"stored"}


def test_an_unusable_db_path_is_explained(monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("COMPILEWATCH_DB", str(blocker / "compilewatch.duckdb"))
    monkeypatch.setenv("COMPILEWATCH_BOOTSTRAP", "0")
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception
    assert at.error and "COMPILEWATCH_DB" in shown(at.error[0].value)
