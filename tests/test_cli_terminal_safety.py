"""Names from files and archives never reach the terminal raw. (Seen: screen-clear and
title-setting escape codes in a file or archive-member name printed as is by the CLI's result
table.) Real logs under hostile names, through the real command line."""
from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent
TRACE = REPO / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXT = REPO / "fixtures" / "text" / "torch2.13_all.log"
HOSTILE = "run\x1b]0;owned\x07\x1b[2J\x1b[31m[bold]red\r"


def _cw(*args):
    return subprocess.run([sys.executable, "-m", "compilewatch", *map(str, args)], cwd=REPO.parent,
                          capture_output=True, timeout=300)


def test_escape_codes_in_file_and_member_names_are_shown_not_sent(tmp_path):
    loose = tmp_path / (HOSTILE + ".log")
    shutil.copy(TEXT, loose)
    tgz = tmp_path / "bundle.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        data = TRACE.read_bytes()
        info = tarfile.TarInfo(HOSTILE + "rank0.log.gz")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    r = _cw("ingest", loose, tgz, "--db", tmp_path / "db" / "x.duckdb")
    for stream in (r.stdout, r.stderr):
        assert b"\x1b" not in stream and b"\x07" not in stream and b"\r" not in stream
    out = r.stdout.decode()
    assert "run\\x1b]0;owned\\x07\\x1b[2J\\x1b[31m[bold]red\\x0d.log" in out   # shown, markup untouched
    assert "1 stored" in out
    # the archive's member is refused by the archive rules; its name in the reason is shown safely too
    assert r.returncode == 1 and "control characters in its name" in " ".join(out.split())


def test_a_refused_file_with_escape_codes_in_its_name(tmp_path):
    bad = tmp_path / (HOSTILE + ".txt")
    bad.write_text("hello, not a log\n")
    for command in (("ingest", "--db", tmp_path / "db" / "x.duckdb"), ("check", "--max-graph-breaks", "0")):
        r = _cw(command[0], bad, *command[1:])
        assert r.returncode == 2
        assert b"\x1b" not in r.stdout + r.stderr and b"\x07" not in r.stdout + r.stderr
        assert "refused run\\x1b]0;owned" in r.stderr.decode()
