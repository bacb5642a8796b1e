"""Per-compile-id artifacts: what we store and show equals the payload in the log.

Two independent checks over real traces (conftest lists them):
- every stored payload hashes to the md5 the envelope announces (``has_payload``), read from the
  kept raw file at the stored line; every value-only record equals the envelope's value;
- every file tlparse (0.4.3, ``--plain-text``) writes into a compile id's folder has its twin in our
  store, with the same text (JSON compared as data: tlparse re-indents it).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from compilewatch.core.errors import NotFoundError
from compilewatch.deepdive import artifacts, show
from compilewatch.ingest.trace.parsers.artifacts import PAYLOAD_EVENTS, VALUE_EVENTS

from deep_support import FIXTURES, public_paths, run_of, trace_paths

TLPARSE = Path(sys.executable).parent / "tlparse"


def _raw_lines(store, file_id: int) -> list[bytes]:
    with store.read() as con:
        stored = con.execute("SELECT stored_path FROM files WHERE file_id = ?", [file_id]).fetchone()[0]
    data = (store.folder / stored).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return list(io.BytesIO(data))


def _envelope(line: bytes) -> dict:
    return json.loads(line[line.index(b"] {") + 2:])


def _all(store) -> list[dict]:
    with store.read() as con:
        return [a | {"run_id": r} for r, in con.execute("SELECT DISTINCT run_id FROM artifacts").fetchall()
                for a in artifacts.list_artifacts(con, r, all_ids=True)]


def test_every_payload_matches_the_md5_the_log_announces(deep_store):
    checked = defaultdict(int)
    lines_of: dict = {}
    with deep_store.read() as con:
        bad = {(f, ln) for f, ln in con.execute(
            "SELECT file_id, line_no FROM ingest_errors WHERE kind IN ('payload_md5', 'truncated')").fetchall()}
        for a in _all(deep_store):
            if a["kind"] in VALUE_EVENTS or a["kind"] == "dynamo_start" or (a["file_id"], a["line_no"]) in bad:
                continue
            if a["file_id"] not in lines_of:
                lines_of[a["file_id"]] = _raw_lines(deep_store, a["file_id"])
            env = _envelope(lines_of[a["file_id"]][a["line_no"] - 1])
            assert a["kind"] in env, (a, env)
            art = artifacts.fetch(con, a["run_id"], a["file_id"], a["line_no"])
            # an artifact logged without a payload is shown empty, as tlparse shows it
            assert hashlib.md5(art.text.encode("utf-8")).hexdigest() == env.get("has_payload", hashlib.md5(b"").hexdigest()), art.title
            assert art.size_bytes == len(art.text.encode("utf-8"))
            checked[a["kind"] if a["kind"] != "artifact" else "artifact"] += 1
    # the kinds the brief names, as far as these real traces carry them
    for kind in ("dynamo_output_graph", "dynamo_cpp_guards_str", "aot_forward_graph",
                 "aot_backward_graph", "aot_joint_graph", "aot_inference_graph", "inductor_post_grad_graph",
                 "inductor_output_code", "artifact"):
        assert checked[kind] > 0, (kind, dict(checked))
    if public_paths():
        # (their exported_program payloads fail their own md5: kept, counted as payload_md5, not checked here)
        # (Python guard lists, dynamo_guards, are logged by older torch only: 2.13 logs the C++ guard tree)
        for kind in ("dynamo_guards", "inductor_pre_grad_graph", "graph_dump", "dynamo_graph_break_reason"):
            assert checked[kind] > 0, (kind, dict(checked))


def _resolve(frames, strings):
    return [{**f, "filename": strings.get(f["filename"], f["filename"])} if isinstance(f, dict) else f
            for f in frames or []]


def test_value_records_equal_the_envelope_value(deep_store):
    seen = defaultdict(int)
    with deep_store.read() as con:
        for a in _all(deep_store):
            if a["kind"] not in VALUE_EVENTS and a["kind"] != "dynamo_start":
                continue
            lines = _raw_lines(deep_store, a["file_id"])
            strings = {}
            for ln in lines[: a["line_no"]]:  # the str table as it stood at that line
                if b'{"str": [' in ln:
                    s, i = _envelope(ln)["str"]
                    strings[i] = s
            env = _envelope(lines[a["line_no"] - 1])
            value = json.loads(artifacts.fetch(con, a["run_id"], a["file_id"], a["line_no"]).text)
            if a["kind"] == "dynamo_start":
                assert value == _resolve(env["dynamo_start"]["stack"], strings)
            else:
                expect = {k: (_resolve(v, strings) if k in ("stack", "user_stack") and v else v)
                          for k, v in env[a["kind"]].items()}
                assert value == expect
            seen[a["kind"]] += 1
    assert seen["dynamo_start"] > 0 and seen["symbolic_shape_specialization"] == 1 and seen["guard_added_fast"] > 0
    if public_paths():
        assert seen["propagate_real_tensors"] > 0 and seen["guard_added"] > 0 and seen["link"] == 1


def test_symbolic_shape_specialisation_of_our_cpu_run(deep_store):
    rid = run_of(deep_store, "deep_dive.log.gz")
    with deep_store.read() as con:
        spec = json.loads(show.artifact_text(con, rid, "1/0", "symbolic_shape_specialization"))
        assert spec["sources"] == ["L['x'].size()[0]"] and spec["value"] == "5"
        assert spec["user_stack"][-1]["name"] == "branchy"
        assert spec["user_stack"][-1]["filename"].endswith("deep_dive.py")
        text = show.compile_text(con, rid, "0/0")
    for title in ("AOT joint graph", "AOT forward graph", "AOT backward graph", "Inductor output code"):
        assert title in text


def _tlparse_stem(a: dict) -> str | None:
    kind, name = a["kind"], a["name"]
    if kind == "artifact":
        return name
    if kind == "inductor_output_code":
        return f"inductor_output_code_{Path(name).stem}" if name else "inductor_output_code"
    if kind == "graph_dump":
        return name
    if kind == "optimize_ddp_split_child":
        return f"optimize_ddp_split_child_{name}"
    if kind in PAYLOAD_EVENTS and kind not in ("dynamo_guards", "dump_file", "dynamo_graph_break_reason"):
        return kind
    return None  # rendered as HTML by tlparse, or not a per-compile file


_TL_FILE = re.compile(r"^(.*)_(\d+)\.(txt|json)$")


@pytest.mark.skipif(not TLPARSE.exists(), reason="tlparse (dev extra) not installed")
@pytest.mark.parametrize("log", trace_paths(), ids=lambda p: p.name)
def test_same_text_as_tlparse_writes(deep_store, log, tmp_path):
    src = tmp_path / "in.log"
    src.write_bytes(gzip.decompress(log.read_bytes()) if log.name.endswith(".gz") else log.read_bytes())
    out = tmp_path / "out"
    subprocess.run([str(TLPARSE), str(src), "-o", str(out), "--no-browser", "--plain-text"],
                   check=True, capture_output=True, timeout=120)
    directory = json.loads((out / "compile_directory.json").read_text())
    rid = run_of(deep_store, log.name)
    compared = written = 0
    with deep_store.read() as con:
        for key, entry in directory.items():
            cid = key.strip("[]")
            cid = None if cid == "-/-" else cid  # tlparse's folder for records without a compile id
            theirs = defaultdict(list)
            for f in entry.get("artifacts", []):
                m = _TL_FILE.match(f["name"])
                if m and (out / f["url"]).is_file():
                    theirs[m.group(1)].append((int(m.group(2)), out / f["url"], m.group(3)))
            ours = defaultdict(list)
            for a in artifacts.list_artifacts(con, rid, cid):
                stem = _tlparse_stem(a)
                if stem:
                    ours[stem].append(a)
            for stem, files in theirs.items():
                written += len(files)
                files.sort()
                assert len(ours[stem]) == len(files), (cid, stem)
                for (_, path, ext), a in zip(files, ours[stem]):
                    text = artifacts.fetch(con, rid, a["file_id"], a["line_no"]).text
                    if ext == "json":
                        try:
                            expect = json.loads(path.read_text())
                        except ValueError:
                            assert text == path.read_text()
                        else:
                            assert json.loads(text) == expect, (cid, stem)
                    else:
                        assert text == path.read_text(encoding="utf-8"), (cid, stem)
                    compared += 1
    assert compared == written
    assert compared > 0 or "export" in log.name  # tlparse writes export records only with --export


def test_listing_reads_no_payload_and_show_errors_name_the_fix(deep_store):
    rid = run_of(deep_store, "deep_dive.log.gz")
    with deep_store.read() as con:
        rows = artifacts.list_artifacts(con, rid, "0/0")
        assert rows and all("payload_z" not in r and "text" not in r for r in rows)
        with pytest.raises(NotFoundError) as e:
            show.compile_text(con, rid, "9/9")
        assert "0/0" in e.value.hint and "1/1" in e.value.hint
        with pytest.raises(NotFoundError):
            show.run_text(con, "no-such-run")
        with pytest.raises(NotFoundError) as e:
            show.artifact_text(con, rid, "0/0", "no_such_artifact")
        assert "dynamo_output_graph" in e.value.hint


def test_reingest_adds_artifacts_to_a_store_from_the_previous_parser(tmp_path):
    """A store filled before artifacts existed gains them through `reingest` (PARSER_VERSION 2)."""
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.ingest.reingest import reingest
    from compilewatch.store import open_store

    store = open_store(tmp_path / "cw.duckdb")
    ingest_paths(store, [FIXTURES / "deep_dive.log.gz"])
    with store.write() as con:
        n = con.execute("SELECT count(*) FROM artifacts").fetchone()[0]
        con.execute("DELETE FROM artifacts")
        con.execute("UPDATE files SET parser_version = 1")
    assert n > 0
    assert reingest(store) == 1
    with store.read() as con:
        assert con.execute("SELECT count(*) FROM artifacts").fetchone()[0] == n
    shutil.rmtree(tmp_path, ignore_errors=True)
