"""`compilewatch summarize --json` over every real log, saved or compared: the check that a change
to the parsers or the pipeline that is meant to change nothing changed nothing.

    .venv/bin/python benchmarks/summarize_snapshot.py save OUT_DIR        # before the change
    .venv/bin/python benchmarks/summarize_snapshot.py compare OUT_DIR     # after it: exit 1 on a difference

Inputs: every file under sample_logs/, tests/fixtures/ and the public tlparse logs
(``--public-logs``, default ``../shared/public_logs`` beside the checkout, skipped when absent),
one `summarize` each, and every folder under them as one input too (walking, bundles read through
their manifest, files that are not logs skipped). A folder that holds a skipped path (this check's
own goldens) is left out whole, so adding goldens does not change the set. Each input's output is the command's stdout, stderr
and exit status exactly as the command line gives them (`compilewatch.cli.main` in this process, so a
run over a few hundred inputs takes a few minutes, not one interpreter start per input). Keep OUT_DIR
outside the checkout; it holds one JSON file per input and an index.

To take the "before" set from another revision, run this script with PYTHONPATH pointing at a
folder where `compilewatch/` is that revision's `compilewatch/` with its rooms (`core`, `store`,
`ingest`, ...) linked in beside `cli/`, as pyproject's package-dir maps them; the line it prints
first says which source it ran.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("sample_logs", "tests/fixtures")
NOT_LOGS = ("tests/fixtures/summarize",)   # this check's own goldens (tests/ingest/test_summarize_golden.py)


def inputs(public_logs: Path | None) -> list[Path]:
    """Every file and folder under the real-log roots, in a fixed order."""
    roots = [REPO / r for r in ROOTS]
    if public_logs is not None and public_logs.is_dir():
        roots.append(public_logs)
    skip = [REPO / s for s in NOT_LOGS]
    found: list[Path] = []
    for root in roots:
        for p in [root, *sorted(root.rglob("*"))]:
            if "__pycache__" in p.parts or any(p == s or s in p.parents or p in s.parents for s in skip):
                continue
            found.append(p)
    return found


def label(path: Path, public_logs: Path | None) -> str:
    """The input's name as stored in the index: relative to its root, so two checkouts compare."""
    for base, name in ((REPO, ""), (public_logs, "public_logs")):
        if base is not None:
            try:
                rel = path.relative_to(base)
            except ValueError:
                continue
            return str(Path(name) / rel) if name else str(rel)
    return str(path)


def summarize_json(path: Path) -> tuple[int, str, str]:
    """What `compilewatch summarize PATH --json` prints on stdout and stderr, and its exit status."""
    from compilewatch.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["summarize", str(path), "--json"])
    return status, out.getvalue(), err.getvalue()


def snapshot(public_logs: Path | None) -> dict[str, dict]:
    result = {}
    paths = inputs(public_logs)
    t0 = time.perf_counter()
    for i, path in enumerate(paths, 1):
        status, out, err = summarize_json(path)
        result[label(path, public_logs)] = {"status": status, "stdout": out, "stderr": err}
        if i % 25 == 0:
            print(f"  {i}/{len(paths)} inputs, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return result


def _file_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16] + ".json"


def save(out: Path, snap: dict[str, dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for key, value in snap.items():
        name = _file_name(key)
        (out / name).write_text(json.dumps(value), encoding="utf-8")
        index[key] = name
    (out / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")


def compare(saved: Path, snap: dict[str, dict]) -> list[str]:
    """The inputs whose output differs from the saved one, or that are in one set only."""
    index = json.loads((saved / "index.json").read_text(encoding="utf-8"))
    differ = [f"only in the saved set: {k}" for k in sorted(set(index) - set(snap))]
    differ += [f"not in the saved set: {k}" for k in sorted(set(snap) - set(index))]
    for key in sorted(set(index) & set(snap)):
        before = json.loads((saved / index[key]).read_text(encoding="utf-8"))
        if before != snap[key]:
            differ.append(f"differs: {key}")
    return differ


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("save", "compare"))
    p.add_argument("dir", type=Path, help="where the outputs are saved / were saved")
    p.add_argument("--public-logs", type=Path, default=REPO.parent / "shared" / "public_logs",
                   help="the public tlparse logs (default: %(default)s; skipped when absent)")
    args = p.parse_args(argv)
    public = args.public_logs if args.public_logs.is_dir() else None
    import compilewatch.ingest
    print(f"compilewatch.ingest from {Path(compilewatch.ingest.__file__).parent}")
    t0 = time.perf_counter()
    snap = snapshot(public)
    runs = sum(1 for v in snap.values() if v["status"] == 0)
    print(f"{len(snap)} inputs ({runs} exit 0) in {time.perf_counter() - t0:.0f} s"
          f"{'' if public else '; public logs absent'}")
    if args.action == "save":
        save(args.dir, snap)
        print(f"saved to {args.dir}")
        return 0
    differ = compare(args.dir, snap)
    for line in differ:
        print(line)
    print(f"{len(snap) - len(differ)} identical, {len(differ)} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
