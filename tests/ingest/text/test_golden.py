"""Golden tests: every log under tests/fixtures/text/ parses to exactly the records in
tests/fixtures/text/golden/<name>.json (counts, errors and every row).

Regenerate after a deliberate parser change, then read the diff before committing:

    UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/ingest/text/test_golden.py

``ts`` is left out of the goldens: glog prefixes carry no year, so it depends on the year the
test runs in (tests/ingest/text/test_text.py checks it separately).
"""
import json
import os
from pathlib import Path

import pytest

from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.text import parse_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "text"
GOLDEN = FIXTURES / "golden"
LOGS = sorted(FIXTURES.glob("*.log"))


def snapshot(path: Path) -> dict:
    sink = CollectingSink()
    with open(path, "rb") as fh:
        parse_text(fh, sink)
    counts = {**{t: len(rs) for t, rs in sink.rows.items()}, "errors": len(sink.errors)}
    rows = {t: [{k: v for k, v in r.items() if k != "ts"} for r in rs] for t, rs in sorted(sink.rows.items())}
    return {"counts": dict(sorted(counts.items())), "errors": sink.errors, "rows": rows}


def test_every_fixture_has_a_readme_line():
    readme = (FIXTURES / "README.md").read_text()
    for log in LOGS:
        assert log.name in readme, f"{log.name} has no source line in README.md"


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_golden(log):
    got = snapshot(log)
    golden = GOLDEN / (log.stem + ".json")
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    assert golden.exists(), f"no golden for {log.name}: run with UPDATE_GOLDEN=1"
    want = json.loads(golden.read_text())
    assert got["counts"] == want["counts"]
    assert got["errors"] == want["errors"]
    assert got["rows"] == want["rows"]
