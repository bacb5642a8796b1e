"""The Compare page opens on a pair that means something: two versions (or two runs) that ran the same
model on the same hardware, the newest such pair, on the sample logs (CPU torch 2.13 and 2.14.1,
GPU torch 2.11 on H100 and H200), with no warning that the sides ran on different hardware. What a
pair shares is read from the store the page reads."""
from __future__ import annotations

from test_pages import PAGES, _ok

from compilewatch.app.queries.common import HARDWARE
from compilewatch.store import open_store

WIDE = {"from": "2000-01-01", "to": "2100-01-01"}
_DIFFERENT_HARDWARE = "are only comparable on the same hardware"


def _runs(db) -> list[tuple]:
    with open_store(db).read() as con:
        return con.execute(f"SELECT run_id, torch_version, model, {HARDWARE} FROM runs r").fetchall()


def test_two_versions_open_on_one_model_and_hardware(app_at, sample_db):
    at = app_at(sample_db, PAGES["compare"], query=WIDE)
    _ok(at)
    a, b = at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value
    runs = _runs(sample_db)
    ran = {v: {(m, h) for _, tv, m, h in runs if tv == v} for v in (a, b)}
    assert a != b and ran[a] & ran[b], (a, b, ran)
    assert not any(_DIFFERENT_HARDWARE in w.value for w in at.warning), [w.value for w in at.warning]


def test_two_runs_open_on_one_model_and_hardware(app_at, sample_db):
    at = app_at(sample_db, PAGES["compare"], query=WIDE)
    at.segmented_control(key="cmp_mode").set_value("Two runs").run()
    _ok(at)
    a, b = at.selectbox(key="cmp_run_a").value, at.selectbox(key="cmp_run_b").value
    by_id = {rid: (m, h) for rid, _, m, h in _runs(sample_db)}
    assert a != b and by_id[a] == by_id[b], (by_id[a], by_id[b])
    assert not any(_DIFFERENT_HARDWARE in w.value for w in at.warning), [w.value for w in at.warning]
