"""Run detail's deep dive over real traces (tests/fixtures/trace through the loader): a compile id's
artifacts open one at a time and show the logged payload, specialisations, failures, the stack trie,
the Perfetto download, and graph breaks explained with their registry page."""
from __future__ import annotations

from test_pages import PAGES, _ok, _table

from compilewatch.app import ui
from compilewatch.deepdive import artifacts, gb_registry
from compilewatch.store import open_store

WIDE = {"from": "2000-01-01", "to": "2100-01-01"}


def _run(db, name):
    with open_store(db).read() as con:
        return con.execute("SELECT run_id FROM files WHERE original_name LIKE ? LIMIT 1", [f"%{name}"]).fetchone()[0]


def test_artifacts_open_one_at_a_time_with_the_logged_payload(app_at, real_db):
    rid = _run(real_db, "deep_dive.log.gz")
    at = app_at(real_db, PAGES["run_detail"], query={"run": rid, "cid": "1/0", **WIDE})
    _ok(at)
    spec = _table(at, "symbol", "sources", "value")
    assert list(spec["sources"]) == ["L['x'].size()[0]"] and list(spec["value"]) == ["5"]
    box = at.selectbox(key="rd_artifact")
    assert box.value is None and len(box.options) > 5
    shown_before = {c.value for c in at.code}
    with open_store(real_db).read() as con:
        graph = next(a for a in artifacts.list_artifacts(con, rid, "1/0") if a["kind"] == "dynamo_output_graph")
        payload = artifacts.fetch(con, rid, graph["file_id"], graph["line_no"]).text
    assert payload not in shown_before  # nothing of a payload is sent before it is picked
    box.select(f"{graph['file_id']}:{graph['line_no']}").run()
    _ok(at)
    assert payload.rstrip("\n") in {c.value.rstrip("\n") for c in at.code}  # st.code drops the final newline


def test_stack_trie_tab_and_perfetto_download(app_at, real_db):
    rid = _run(real_db, "deep_dive.log.gz")
    at = app_at(real_db, PAGES["run_detail"], query={"run": rid, **WIDE})
    _ok(at)
    trie = [c.value for c in at.code if "─ [1/1]" in c.value]
    assert trie and "in branchy" in trie[0] and "[1/1] · recompile" in trie[0]
    assert "Download as Chrome trace (open in Perfetto)" in str(at)


def test_failed_compile_says_why(app_at, real_db):
    rid = _run(real_db, "graph_break_skip.log.gz")
    at = app_at(real_db, PAGES["run_detail"], query={"run": rid, "cid": "0/0", **WIDE})
    _ok(at)
    assert any(ui.md("[0/0] failed: Unsupported") in w.value for w in at.warning)


def test_graph_break_explained_with_its_registry_page(app_at, real_db):
    from compilewatch.app.filters import Filters
    from compilewatch.app.queries import run_detail

    rid = _run(real_db, "graph_break_recompile.log.gz")
    at = app_at(real_db, PAGES["run_detail"], query={"run": rid, **WIDE})
    _ok(at)
    breaks = _table(at, "gb_type", "registry")
    assert all(u.startswith(gb_registry.GRAPH_BREAK_SITE) for u in breaks["registry"])
    with open_store(real_db).read() as con:
        listed = run_detail.breaks(con, Filters(run_id=rid))
    b = listed[listed["gb_type"].str.contains("item", na=False)].iloc[0]
    at.selectbox(key="rd_break_explain").select(b["break_key"]).run()
    _ok(at)
    text = "\n".join(m.value for m in at.markdown)
    assert f"({gb_registry.registry_url(b['gb_code'])})" in text
    for hint in gb_registry.hint_list(b["hints"]):
        assert f"- {ui.md(hint)}" in text
