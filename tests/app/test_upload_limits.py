"""The Upload page with real logs past the overall cap and a damaged bundle beside good ones: every
file is named in the result with its outcome, the box is not green when files failed, and the
uploaded bytes are dropped once ingested."""
from __future__ import annotations

import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "trace" / "graph_break_recompile.log.gz"
TEXT = ROOT / "tests" / "fixtures" / "text" / "torch2.13_all.log"
BUNDLE = ROOT / "sample_logs" / "cpu-torch2.13" / "item_branch_default_infer.tar.gz"


def _result(at):
    return next(d.value for d in at.dataframe if "duplicate" in d.value.columns)


def test_over_cap_and_damaged_files_are_named_and_the_box_is_not_green(app_at, empty_db, monkeypatch):
    monkeypatch.setenv("COMPILEWATCH_UPLOAD_MAX_TOTAL_MB", "1")
    big = TEXT.read_bytes() * (2 * 2**20 // TEXT.stat().st_size + 1)   # a real log, over 1 MiB
    damaged = bytearray(BUNDLE.read_bytes())
    damaged[len(damaged) // 3: len(damaged) // 3 + 300] = bytes(300)
    at = app_at(empty_db, "views/upload.py")
    assert not at.exception
    up = at.file_uploader(key="up_files")
    up.upload(TRACE.name, TRACE.read_bytes())
    up.upload("big.log", big)
    up.upload("damaged.tar.gz", bytes(damaged))
    at.run()
    at.button(key="up_go").click().run()
    assert not at.exception
    res = _result(at)
    by = dict(zip(res["file"], res["status"]))
    msg = dict(zip(res["file"], res["message"]))
    assert by[TRACE.name] == "stored"
    assert by["big.log"] == "failed" and "cap for one upload" in msg["big.log"]
    assert by["damaged.tar.gz"] == "failed" and "damaged" in msg["damaged.tar.gz"]
    assert not at.success and at.warning and "2 failed" in at.warning[0].value
    # each failure's file and cause are in the box's text, not only in the table
    box = at.warning[0].value   # Markdown: the names' dots are escaped
    assert "**big\\.log**" in box and "cap for one upload" in box
    assert "**damaged\\.tar\\.gz**" in box
    assert not at.file_uploader(key="up_files_1").value   # emptied: Streamlit drops the bytes


def test_all_failed_is_an_error_box(app_at, empty_db):
    at = app_at(empty_db, "views/upload.py")
    at.file_uploader(key="up_files").upload("broken.zip", b"PK\x03\x04 not really a zip")
    at.run()
    at.button(key="up_go").click().run()
    assert not at.exception and not at.success and at.error
    assert "nothing was stored" in at.error[0].value
