"""Hostile and damaged input, made by mutating real bundles and logs (sample_logs/, tests/fixtures/):
corrupt compressed files fail alone, decompression bombs stop at the cap, unsafe archive members
are refused, a cut-off .log.gz keeps what decodes, a mangled benchmark CSV keeps its good rows,
a killed inbox worker's claim is picked up again, and a killed ingest's scratch files are swept.
Each test reproduces a finding of the reliability review before checking its fix."""
from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from compilewatch.ingest import archives
from compilewatch.ingest.file_kind import damage, open_binary
from compilewatch.ingest.inbox import process_once
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store, scratch

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "sample_logs" / "cpu-torch2.13" / "item_branch_default_infer.tar.gz"
BUNDLE2 = REPO / "sample_logs" / "cpu-torch2.13" / "mlp_default_infer.tar.gz"
TEXT_LOG = REPO / "tests" / "fixtures" / "text" / "torch2.13_all.log"


def _rows(store, sql, params=()):
    with store.read() as con:
        return con.execute(sql, list(params)).fetchall()


def _raw_files(store) -> set[str]:
    return {p.name for p in store.raw_dir.rglob("*") if p.is_file()}


def _damage(data: bytes, at: float, n: int = 64) -> bytes:
    b = bytearray(data)
    i = int(len(b) * at)
    for k in range(i, min(i + n, len(b))):
        b[k] ^= 0x5A
    return bytes(b)


def _zip_of_bundle(src: Path, dest: Path) -> Path:
    with tarfile.open(src) as tf, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for m in tf.getmembers():
            if m.isfile():
                zf.writestr(m.name, tf.extractfile(m).read())
    return dest


def _zeros_tar(dest: Path, size: int, name="trace/zeros.log") -> Path:
    class Zeros(io.RawIOBase):
        left = size

        def readable(self):
            return True

        def readinto(self, b):
            k = min(len(b), self.left)
            b[:k] = bytes(k)
            self.left -= k
            return k
    with tarfile.open(dest, "w:gz") as tf:
        info = tarfile.TarInfo(name)
        info.size = size
        tf.addfile(info, io.BufferedReader(Zeros()))
    return dest


# -- 9.1 one corrupt compressed input aborts everything ------------------------------------------

def test_corrupt_gz_zip_and_targz_fail_alone_beside_good_files(store, tmp_path):
    folder = tmp_path / "drop"
    folder.mkdir()
    good = folder / "good.tar.gz"
    good.write_bytes(BUNDLE.read_bytes())
    (folder / "bad.log.gz").write_bytes(_damage(gzip.compress(TEXT_LOG.read_bytes()), 0.5))
    (folder / "bad.zip").write_bytes(_damage(_zip_of_bundle(BUNDLE2, tmp_path / "m.zip").read_bytes(), 0.3, 400))
    (folder / "cut.tar.gz").write_bytes(BUNDLE2.read_bytes()[:5000])  # an upload cut short
    (folder / "flipped.tar.gz").write_bytes(_damage(BUNDLE2.read_bytes(), 0.5))  # caught by the gzip CRC
    rep = ingest_paths(store, [folder])  # before the fix: zlib.error escaped here
    by = {f.name: f for f in rep.files}
    assert by["drop/bad.zip"].status == "failed" and "damaged" in by["drop/bad.zip"].message
    assert by["drop/cut.tar.gz"].status == "failed" and "damaged" in by["drop/cut.tar.gz"].message
    assert by["drop/flipped.tar.gz"].status == "failed" and "damaged" in by["drop/flipped.tar.gz"].message
    # the damaged .gz log keeps the graph breaks before the damage and records why it stopped
    assert by["drop/bad.log.gz"].status == "partial" and by["drop/bad.log.gz"].records.get("graph_breaks", 0) > 0
    assert _rows(store, "SELECT count(*) FROM ingest_errors WHERE kind = 'truncated' AND message LIKE '%damaged%'")[0][0] == 1
    # every file of the good bundle is stored
    good_files = [f for f in rep.files if f.name.startswith("drop/good.tar.gz/")]
    assert len(good_files) == 5 and all(f.status == "stored" for f in good_files)


def test_inbox_watch_survives_a_corrupt_entry_and_ingests_the_next(store, tmp_path):
    inbox = store.inbox_dir
    inbox.mkdir(exist_ok=True)
    (inbox / "a-bad.zip").write_bytes(_damage(_zip_of_bundle(BUNDLE2, tmp_path / "m.zip").read_bytes(), 0.3, 400))
    (inbox / "b-good.tar.gz").write_bytes(BUNDLE.read_bytes())
    results = dict(process_once(store))
    assert not results["a-bad.zip"].ok and results["b-good.tar.gz"].ok
    assert "damaged" in (inbox / "failed" / "a-bad.zip.error.txt").read_text()
    assert (inbox / "done" / "b-good.tar.gz").is_file()


# -- 9.2 decompression bombs --------------------------------------------------------------------

def test_bomb_stops_at_the_ratio_cap_and_keeps_nothing(store, tmp_path):
    bomb = _zeros_tar(tmp_path / "bomb.tar.gz", 300 * 2**20)  # ~300 KB holding 300 MiB of zeros
    assert bomb.stat().st_size < 2 * 2**20
    before = _raw_files(store)
    rep = ingest_paths(store, [bomb])
    assert rep.files[0].status == "failed" and "decompression bomb" in rep.files[0].message
    assert _raw_files(store) == before
    assert _rows(store, "SELECT count(*) FROM files")[0][0] == 0
    leftovers = [p for p in store.tmp_root.rglob("*") if p.is_file()]
    assert leftovers == []


def test_nothing_is_written_past_the_size_cap(tmp_path):
    bomb = _zeros_tar(tmp_path / "z.tar.gz", 50 * 2**20)
    limits = archives.ArchiveLimits(max_total_bytes=8 * 2**20, max_entries=100, max_ratio=200, max_depth=3,
                                    ratio_floor_bytes=2**40)
    budget = archives.Budget(limits)
    with pytest.raises(archives.ArchiveError, match="more than 8 MiB"):
        archives.extract(bomb, tmp_path / "out", budget)
    assert budget.written <= limits.max_total_bytes + (1 << 20)  # the chunk that crossed it is not written
    assert not (tmp_path / "out").exists()


def test_zip_bomb_and_entry_cap(store, tmp_path, monkeypatch):
    z = tmp_path / "zbomb.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("zeros.log", "w", force_zip64=True) as out:
            for _ in range(200):
                out.write(bytes(2**20))
    rep = ingest_paths(store, [z])
    assert rep.files[0].status == "failed" and "decompression bomb" in rep.files[0].message
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(30):
            zf.writestr(f"b/f{i}.log", TEXT_LOG.read_bytes()[:100])
    monkeypatch.setenv("COMPILEWATCH_ARCHIVE_MAX_ENTRIES", "20")
    rep = ingest_paths(store, [many])
    assert rep.files[0].status == "failed" and "more than 20 entries" in rep.files[0].message
    assert _rows(store, "SELECT count(*) FROM files")[0][0] == 0


def test_nested_archives_unpack_to_a_fixed_depth(store, tmp_path):
    inner = tmp_path / "l0.tar.gz"
    inner.write_bytes(BUNDLE.read_bytes())
    for level in range(1, 4):  # l3 holds l2 holds l1 holds the real bundle: 4 levels
        outer = tmp_path / f"l{level}.tar.gz"
        with tarfile.open(outer, "w:gz") as tf:
            tf.add(inner, arcname=inner.name)
        inner = outer
    rep = ingest_paths(store, [tmp_path / "l2.tar.gz"])  # 3 levels: allowed
    assert sum(f.status == "stored" for f in rep.files) == 5
    rep = ingest_paths(store, [tmp_path / "l3.tar.gz"])  # 4 levels: refused, nothing more stored
    assert [f.status for f in rep.files] == ["failed"] and "nested deeper than 3" in rep.files[0].message


ESCAPES = ("symlink", "hardlink", "absolute", "dotdot", "device")


def escaping_tar(kind: str, p: Path, outside: Path) -> Path:
    """A real bundle's archive with one member more that reaches out of where it is unpacked: a
    link, an absolute name (`outside`), a ../ name or a device."""
    with tarfile.open(BUNDLE) as src, tarfile.open(p, "w:gz") as tf:
        for m in src.getmembers():
            tf.addfile(m, src.extractfile(m) if m.isfile() else None)
        evil = tarfile.TarInfo({"absolute": str(outside), "dotdot": "../../cw-evil.log"}.get(kind, "x/evil.log"))
        if kind == "symlink":
            evil.type, evil.linkname = tarfile.SYMTYPE, "/etc/passwd"
        elif kind == "hardlink":
            evil.type, evil.linkname = tarfile.LNKTYPE, "/etc/passwd"
        elif kind == "device":
            evil.type = tarfile.CHRTYPE
        data = b"I1122 00:00:00.000000 1 torch/_dynamo/x.py:1] evil\n"
        if evil.type == tarfile.REGTYPE:
            evil.size = len(data)
            tf.addfile(evil, io.BytesIO(data))
        else:
            tf.addfile(evil)
    return p


def test_links_and_paths_outside_the_target_are_refused(store, tmp_path):
    outside = tmp_path.parent / "cw-evil.log"   # an absolute member name pointing out of the target
    cases = {kind: escaping_tar(kind, tmp_path / f"{kind}.tar.gz", outside) for kind in ESCAPES}
    for kind, p in cases.items():
        rep = ingest_paths(store, [p])
        assert [f.status for f in rep.files] == ["failed"], kind
        assert any(w in rep.files[0].message for w in ("link", "escapes", "device")), (kind, rep.files[0].message)
    assert not outside.exists() and not (tmp_path.parent.parent / "cw-evil.log").exists()
    assert _rows(store, "SELECT count(*) FROM files")[0][0] == 0


# -- 9.8 a truncated small .log.gz --------------------------------------------------------------

def test_truncated_small_log_gz_keeps_what_decodes(store, tmp_path):
    full = gzip.compress(TEXT_LOG.read_bytes())
    cut = full[: len(full) * 2 // 3]
    assert len(cut) < 256 * 1024
    p = tmp_path / "cut.log.gz"
    p.write_bytes(cut)
    # what zcat recovers: the reference for what must be kept
    prefix = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)
    with open_binary(p) as s:
        got = s.read()
        assert damage(s) and "cut short" in damage(s)
    assert got == prefix and len(prefix.splitlines()) > 100
    (tmp_path / "prefix.log").write_bytes(prefix[: prefix.rfind(b"\n") + 1])
    rep = ingest_paths(store, [p, tmp_path / "prefix.log"])
    cut_res, ref = rep.files
    assert cut_res.status == "partial" and cut_res.kind == "torch_logs"
    assert cut_res.records["graph_breaks"] == ref.records["graph_breaks"] > 0


# -- 9.9 the benchmark CSV parser ----------------------------------------------------------------

def test_bench_csv_with_bare_cr_and_infinite_integers_keeps_good_rows(store, tmp_path):
    with tarfile.open(BUNDLE) as tf:
        real = next(tf.extractfile(m).read() for m in tf.getmembers() if m.name.endswith("bench.csv"))
    header, *rows = real.decode().strip().splitlines()
    cols = header.split(",")
    assert "batch_size" in cols and rows
    def mutate(row, col, value):
        v = row.split(",")
        v[cols.index(col)] = value
        return ",".join(v)
    lines = [header, mutate(rows[0], "batch_size", "inf"), mutate(rows[0], "batch_size", "1e309"),
             rows[0].replace(",", ",\r", 1), *rows]
    p = tmp_path / "bench.csv"
    p.write_bytes(("\n".join(lines) + "\n").encode())
    rep = ingest_paths(store, [p])
    f = rep.files[0]
    assert f.kind == "bench_csv" and f.status == "partial"
    assert f.records["bench_results"] == 1 + len(rows)  # the CR row and every real row
    errs = _rows(store, "SELECT line_no, message FROM ingest_errors ORDER BY line_no")
    assert [e[0] for e in errs] == [2, 3] and all("bad number" in e[1] for e in errs)


# -- 9.3 a killed inbox worker strands its bundle ------------------------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_dead_workers_claim_is_recovered_and_names_carry_no_prefix(store, tmp_path):
    inbox = store.inbox_dir
    pid = _dead_pid()
    claim = inbox / ".work" / f"{scratch.host()}-{pid}"
    claim.mkdir(parents=True)
    with tarfile.open(BUNDLE) as tf:
        tf.extractall(claim, filter="data")
    (bundle,) = claim.iterdir()
    # the killed worker had stored 2 of the bundle's files
    part = tmp_path / "part"
    shutil.copytree(bundle, part / bundle.name)
    for f in (part / bundle.name).rglob("*"):
        if f.is_file() and f.name not in ("manifest.json", "bench.csv"):
            f.unlink()
    ingest_paths(store, [part / bundle.name], source="inbox")
    assert _rows(store, "SELECT count(*) FROM files")[0][0] == 2
    # an entry stranded by an older worker that prefixed the pid
    old = inbox / ".work" / f"{pid}-mlp.tar.gz"
    old.write_bytes(BUNDLE2.read_bytes())
    results = dict(process_once(store))
    assert results[bundle.name].ok and results["mlp.tar.gz"].ok
    names = [r[0] for r in _rows(store, "SELECT original_name FROM files")]
    assert len(names) == 10 and len(set(names)) == 10
    assert not any(str(pid) in n for n in names)
    assert _rows(store, "SELECT count(*) FROM (SELECT sha256, run_id FROM files GROUP BY ALL HAVING count(*) > 1)")[0][0] == 0
    assert not claim.exists() and (inbox / "done" / bundle.name).is_dir()


def test_kill_9_of_the_inbox_worker_mid_bundle_then_restart_completes(tmp_path):
    """A real `compilewatch inbox --watch` killed while it holds a claim; the next worker finishes it."""
    db = tmp_path / "s" / "cw.duckdb"
    store = open_store(db)
    inbox = store.inbox_dir
    inbox.mkdir(exist_ok=True)
    for i, src in enumerate([BUNDLE, BUNDLE2] * 3):  # six bundles: one is in flight when killed
        with tarfile.open(src) as tf:
            tf.extractall(tmp_path / f"b{i}", filter="data")
        (root,) = (tmp_path / f"b{i}").iterdir()
        m = (root / "manifest.json").read_text().replace('"run_id": "', f'"run_id": "k{i}-')
        (root / "manifest.json").write_text(m)
        root.rename(inbox / f"bundle{i}")
    cmd = [sys.executable, "-m", "compilewatch", "inbox", "--db", str(db), "--watch", "--interval", "0.2"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    work = inbox / ".work"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if work.is_dir() and any(d.is_dir() and any(d.iterdir()) for d in work.iterdir()):
            break
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert any(work.rglob("manifest.json")), "killed while holding a claim (the case being fixed)"
    subprocess.run([sys.executable, "-m", "compilewatch", "inbox", "--db", str(db)], cwd=REPO, check=True,
                   capture_output=True)
    done = sorted(p.name for p in (inbox / "done").iterdir())
    assert done == [f"bundle{i}" for i in range(6)]
    assert not any(p for p in work.rglob("*"))
    rows = _rows(store, "SELECT run_id, count(*), count(DISTINCT sha256) FROM files GROUP BY run_id ORDER BY run_id")
    assert len(rows) == 6 and all(n == 5 and d == 5 for _, n, d in rows)


# -- 9.10 kill -9 leaves temp files --------------------------------------------------------------

def test_scratch_of_a_killed_ingest_is_swept_on_next_open(tmp_path):
    db = tmp_path / "s" / "cw.duckdb"
    open_store(db)
    big = tmp_path / "big.log"
    with open(big, "wb") as out:  # a real log, repeated: long enough to kill mid-file
        body = TEXT_LOG.read_bytes()
        for _ in range(max(1, (40 * 2**20) // len(body))):
            out.write(body)
    proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", str(big), "--db", str(db)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    owned = db.parent / "tmp" / f"{scratch.host()}-{proc.pid}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(owned.rglob("stage-*/*.ndjson")):
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert any(owned.rglob("*")), "the killed ingest left scratch files (the case being fixed)"
    live = db.parent / "tmp" / f"{scratch.host()}-{os.getpid()}"
    live.mkdir(exist_ok=True)
    (live / "keep").write_text("a live process's scratch")
    store = open_store(db)
    assert not owned.exists() and (live / "keep").exists()
    rep = ingest_paths(store, [big])
    assert rep.files[0].status in ("stored", "partial")
    assert _rows(store, "SELECT count(*) FROM files")[0][0] == 1


def _children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_kill_9_of_an_ingest_takes_its_parse_workers_with_it(tmp_path):
    """A large text log is parsed in ranges by worker processes (ingest/text_ranges.py). kill -9 of
    `compilewatch ingest` must not leave them behind: a forked worker holds what its parent held,
    the store's shared lock included, and would keep every writer out for good."""
    db = tmp_path / "s" / "cw.duckdb"
    open_store(db)
    big = tmp_path / "big.log"
    body = TEXT_LOG.read_bytes()
    with open(big, "wb") as out:
        for _ in range(max(1, (48 * 2**20) // len(body))):
            out.write(body)
    proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", str(big), "--db", str(db), "--workers", "2"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and not workers and proc.poll() is None:
        cmdlines = {c: Path(f"/proc/{c}/cmdline").read_text(errors="replace") for c in _children(proc.pid)}
        workers = [c for c, cmd in cmdlines.items() if "spawn_main" not in cmd and "resource_tracker" not in cmd]
        time.sleep(0.01)
    assert workers, "the ingest finished before its parse workers were seen: make the log larger"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    left = [w for w in workers if Path(f"/proc/{w}").exists()
            and Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not left, f"parse workers outlived the killed ingest: {left}"
    # and nothing keeps the store's lock: a writer gets in at once
    store = open_store(db)
    with store.write(timeout=5) as con:
        con.execute("SELECT 1").fetchall()


def test_kill_9_of_a_folder_ingest_at_several_moments_then_rerun_matches_a_clean_ingest(tmp_path):
    """`compilewatch ingest` of real bundles killed four times, each time on the store the previous
    kill left: 0.5 s after its start, then as soon as the store's raw/ folder holds its 1st, 12th and
    25th file (a raw copy is published just before its file's commit). Moments set by the ingest's
    own progress, not by the clock, land mid-ingest on a fast machine and a slow one alike. Each
    time the store opens and nothing is stored twice; the final rerun holds exactly what a clean
    ingest of the same folder holds."""
    folder = tmp_path / "drop"
    folder.mkdir()
    for b in sorted((REPO / "sample_logs").rglob("*.tar.gz"))[:8]:
        (folder / b.name).write_bytes(b.read_bytes())
    tables = ("runs", "files", "compiles", "graph_breaks", "recompiles", "guard_failures", "step_timings",
              "bench_results", "ingest_errors")

    def counts(store):
        with store.read() as con:
            return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables}

    clean = open_store(tmp_path / "clean" / "cw.duckdb")
    ingest_paths(clean, [folder])
    want = counts(clean)
    assert want["files"] > 30
    db = tmp_path / "killed" / "cw.duckdb"
    raw = open_store(db).folder / "raw"

    def raw_files() -> int:
        return sum(1 for p in raw.rglob("*") if p.is_file()) if raw.exists() else 0

    seen = []
    for at_raw in (None, 1, 12, 25):
        proc = subprocess.Popen([sys.executable, "-m", "compilewatch", "ingest", str(folder), "--db", str(db), "--quiet"],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if at_raw is None:
            time.sleep(0.5)
        else:
            deadline = time.monotonic() + 300
            while raw_files() < at_raw and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
        proc.kill()
        proc.wait()
        store = open_store(db)
        with store.read() as con:
            assert con.execute("SELECT count(*) FROM (SELECT run_id, sha256 FROM files GROUP BY ALL "
                               "HAVING count(*) > 1)").fetchall()[0][0] == 0
            # every stored file has its run: nothing half stored
            assert con.execute("SELECT count(*) FROM files f WHERE NOT EXISTS "
                               "(SELECT 1 FROM runs r WHERE r.run_id = f.run_id)").fetchall()[0][0] == 0
        seen.append(counts(store)["files"])
    assert any(0 < n < want["files"] for n in seen), f"no kill landed mid-ingest: files after each {seen}"
    store = open_store(db)
    ingest_paths(store, [folder])
    assert counts(store) == want
    assert not any(p.is_file() for p in store.tmp_root.rglob("*"))


def test_a_pipe_fails_alone_with_what_to_do(store, tmp_path):
    """`compilewatch ingest <(zcat log.gz)` names a pipe: ingest reads a file more than once (the
    sniff, the parse, the raw copy), so it is refused with what to do, beside a file that is
    stored, and nothing of it is kept."""
    fifo = tmp_path / "log.pipe"
    os.mkfifo(fifo)
    data = TEXT_LOG.read_bytes()[:30000]   # under a pipe's buffer: the writer never waits on the reader

    def write():
        with open(fifo, "wb") as f:
            f.write(data)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    raw_before = _raw_files(store)
    results = ingest_paths(store, [fifo, TEXT_LOG])
    writer.join(5)
    by_name = {r.name: r for r in results.files}
    assert by_name["log.pipe"].status == "failed"
    assert "not a regular file" in by_name["log.pipe"].message and "save it to a file" in by_name["log.pipe"].message
    assert by_name[TEXT_LOG.name].status in ("stored", "partial")
    assert len(_raw_files(store) - raw_before) == 1
