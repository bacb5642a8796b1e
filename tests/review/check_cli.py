"""`compilewatch check` run as CI runs it, for the tests that compare a verdict's cause with the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def check_causes(db: Path, baseline: str, candidate: str) -> dict[tuple[str, str], dict | None]:
    """`compilewatch check --json` on a store, as CI runs it: each regression's and suspicious
    change's cause, by (metric, subject)."""
    p = subprocess.run([sys.executable, "-m", "compilewatch", "check", "--db", str(db), "--baseline", baseline,
                        "--candidate", candidate, "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stdout[-2000:] + p.stderr[-2000:]
    gate = json.loads(p.stdout)
    return {(x["metric"], x["subject"]): x["cause"] for x in gate["regressions"] + gate["suspicious"]}
