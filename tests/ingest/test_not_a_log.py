"""A file in which no record is recognised is not a log: named explicitly it is refused with the
reason, found by walking a folder it is skipped and listed; either way nothing of it is stored (no
files row, no run, no raw copy), and a retry is refused again rather than called a duplicate.
(Seen: sample_logs/README.md stored as an empty TORCH_LOGS run; a PNG given a files row, a run
and a raw copy, then "duplicate" with exit 0 on a retry; an empty archive gave no row and no
message; `check` passed on a PNG and on an unreadable .gz.)"""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from compilewatch.ingest import parsing
from compilewatch.ingest.loader import ingest_paths
from compilewatch.ingest.parsing import UnknownTableError, parse_into
from compilewatch.ingest.records import CollectingSink
from compilewatch.ingest.units import Unit

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TRACE = FIXTURES / "trace" / "graph_break_recompile.log.gz"
TEXT = FIXTURES / "text" / "torch2.13_all.log"


def _real(module: str, rel: str) -> Path:
    """A real non-log file that an installed package ships (a PNG, a CSV of numbers)."""
    mod = pytest.importorskip(module)
    p = Path(mod.__file__).parent / rel
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def _non_logs(tmp_path) -> dict[str, Path]:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    bad_gz = tmp_path / "cut.log.gz"
    bad_gz.write_bytes(b"\x1f\x8b\x08\x00" + TRACE.read_bytes()[4:200][::-1])
    return {
        "png": _real("streamlit", "static/favicon.png"),
        "py": REPO / "ingest" / "loader.py",
        "csv": _real("numpy", "random/tests/data/mt19937-testset-1.csv"),
        "readme": REPO / "sample_logs" / "README.md",
        "empty": empty,
        "bad_gz": bad_gz,
    }


def _counts(store) -> tuple:
    with store.read() as con:
        n = tuple(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("files", "runs", "ingest_errors"))
    raw = [p for p in (store.folder / "raw").rglob("*") if p.is_file()]
    tmp = list(store.tmp_dir.iterdir())
    return (*n, len(raw), len(tmp))


def test_a_file_named_explicitly_that_is_not_a_log_is_refused_and_nothing_is_stored(store, tmp_path):
    for what, path in _non_logs(tmp_path).items():
        for attempt in (1, 2):
            rep = ingest_paths(store, [path])
            (r,) = rep.files
            assert r.status == "failed" and r.bad_input, (what, attempt, r)
            assert r.message.startswith("not a log"), (what, r.message)
            assert rep.bad_input == [r]
        assert _counts(store) == (0, 0, 0, 0, 0), what
    # the reason says what was seen
    rep = ingest_paths(store, [_non_logs(tmp_path)["bad_gz"]])
    assert "compressed stream is damaged" in rep.files[0].message


def test_a_folder_walk_skips_what_is_not_a_log_and_says_so(store, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(REPO / "sample_logs" / "README.md", folder / "README.md")
    shutil.copy(_real("streamlit", "static/favicon.png"), folder / "favicon.png")
    shutil.copy(TRACE, folder / TRACE.name)
    rep = ingest_paths(store, [folder])
    status = {r.name: (r.status, r.message) for r in rep.files}
    assert status["logs/README.md"][0] == "skipped" and status["logs/README.md"][1].startswith("not a log")
    assert status["logs/favicon.png"][0] == "skipped"
    assert status[f"logs/{TRACE.name}"][0] == "stored"
    assert rep.ok and not rep.bad_input
    files, runs, *_ = _counts(store)
    assert (files, runs) == (1, 1)


def test_sample_logs_store_one_run_per_bundle(tmp_path):
    """The first-start store: as many runs as bundles (README.md is not a run)."""
    from compilewatch.ingest.summary import summarize

    sample = REPO / "sample_logs" / "cpu-torch2.13"
    if not sample.is_dir():
        pytest.skip("sample_logs not present")
    folder = tmp_path / "sample_logs"
    shutil.copytree(sample, folder / sample.name)
    shutil.copy(REPO / "sample_logs" / "README.md", folder / "README.md")
    s = summarize([folder])
    readme = [d for d in s["file_details"] if d["name"].endswith("README.md")]
    assert readme and readme[0]["status"] == "skipped" and not s["bad_input"]


def test_an_empty_archive_is_refused_with_a_message(store, tmp_path):
    tgz = tmp_path / "nothing.tar.gz"
    with tarfile.open(tgz, "w:gz"):
        pass
    rep = ingest_paths(store, [tgz])
    (r,) = rep.files
    assert r.status == "failed" and r.bad_input and "holds no files" in r.message
    assert _counts(store)[:2] == (0, 0)


def test_a_real_text_log_and_a_real_trace_are_logs(store, tmp_path):
    rep = ingest_paths(store, [TEXT, TRACE])
    assert [r.status for r in rep.files] == ["stored", "stored"]


@pytest.mark.parametrize("what", ["png", "bad_gz", "py", "empty"])
def test_the_ci_gate_refuses_what_it_cannot_read(tmp_path, what):
    path = _non_logs(tmp_path)[what]
    r = subprocess.run([sys.executable, "-m", "compilewatch", "check", str(path), "--max-graph-breaks", "0",
                        "--max-recompiles", "0"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "passed" not in r.stdout
    assert path.name in r.stderr and "not a log" in r.stderr


def test_ingest_of_a_non_log_exits_2_naming_it(tmp_path):
    png = _real("streamlit", "static/favicon.png")
    r = subprocess.run([sys.executable, "-m", "compilewatch", "ingest", str(png), str(TRACE), "--db",
                        str(tmp_path / "db" / "x.duckdb")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "refused favicon.png: not a log" in r.stderr, (r.stdout, r.stderr)
    assert "1 stored" in r.stdout   # the log beside it is still stored


def test_a_row_for_an_unknown_table_is_an_error(monkeypatch):
    real = parsing.reader_for

    def with_a_new_table(kind):
        parse = real(kind)

        def run(stream, sink):
            parse(stream, sink)
            sink.row("graph_break_stacks", {"x": 1})   # a table no migration creates
        return run
    monkeypatch.setattr(parsing, "reader_for", with_a_new_table)
    from compilewatch.ingest.units import resolve_kind

    unit = Unit(TEXT, TEXT.name, explicit=True)
    kind, sniffed = resolve_kind(unit)
    with pytest.raises(UnknownTableError, match="graph_break_stacks"):
        parse_into(CollectingSink(), unit, kind, sniffed)
