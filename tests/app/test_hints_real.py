"""Graph-break hints from real logs show one bullet per hint. (Seen: both parsers stored the hints
of a break joined by newlines while the app read JSON, so every hint of a break showed as one
bullet; tests then ran on hand-written rows that stored JSON, so no test saw it.)"""
from __future__ import annotations

import json

from compilewatch.store import open_store


def _multi_hint_breaks(db) -> list[tuple[str, str, str]]:
    with open_store(db).read() as con:
        return con.execute("SELECT break_key, hints, source FROM graph_breaks WHERE hints IS NOT NULL").fetchall()


def test_both_parsers_store_hints_as_a_json_list(real_db):
    rows = _multi_hint_breaks(real_db)
    assert {source for _, _, source in rows} >= {"text", "trace_artifact"}, rows[:3]
    for _, hints, _ in rows:
        value = json.loads(hints)
        assert isinstance(value, list) and value and all(isinstance(h, str) and h for h in value)
    assert any(len(json.loads(h)) > 1 for _, h, _ in rows)


def test_hotspots_shows_each_hint_of_a_real_break_as_its_own_bullet(app_at, real_db):
    key, hints = next((k, json.loads(h)) for k, h, _ in _multi_hint_breaks(real_db) if len(json.loads(h)) > 1)
    at = app_at(real_db, "views/hotspots.py", query={"break": key, "from": "2000-01-01", "to": "2100-01-01"})
    assert not at.exception
    md = [m.value for m in at.markdown]
    i = md.index("**Hints**")
    bullets = [line for line in md[i + 1].split("\n") if line.startswith("- ")]
    assert len(bullets) == len(hints) > 1, md[i + 1]
