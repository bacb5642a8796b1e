"""Rewrite tests/ingest/trace/goldens/<fixture>.json from the fixture logs in tests/fixtures/trace/.

    .venv/bin/python -m tests.ingest.trace.regen_goldens

Run it after a deliberate parser change, then read `git diff tests/ingest/trace/goldens` line by line:
every changed number must be explained by the change.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_support import GOLDENS, fixture_logs, parse_path, summary  # noqa: E402


def golden_path(log: Path) -> Path:
    return GOLDENS / (log.name.split(".log")[0] + ".json")


def main() -> None:
    GOLDENS.mkdir(exist_ok=True)
    for log in fixture_logs():
        out = golden_path(log)
        out.write_text(json.dumps(summary(parse_path(log)), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(GOLDENS.parents[3])}")


if __name__ == "__main__":
    main()
