"""What the per-compile-id artifacts cost and what showing one sends.

    python benchmarks/bench_deep_dive.py [--logs DIR ...] [--json out.json]

Ingests the same real traces (default: the public tlparse logs beside the checkout, our CPU
fixtures, and the TORCH_TRACE bundles in sample_logs/) into two fresh stores, once with every
parser and once without the artifact parsers, and prints:

- store growth: the database file after CHECKPOINT with and without artifacts, against the bytes
  of the logs and of the payloads (left in the raw copies of plain traces, where their rows point;
  zlib-compressed in the rows of gzipped ones);
- ingest time with and without them;
- fetching one artifact (the largest) and listing a compile id's artifacts: median of 20;
- KB that Run detail sends (bench_pages' element count) for the run, with that compile id chosen,
  and with its largest artifact opened: a listing sends no payload, one opened sends one.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PUBLIC = ROOT.parent / "shared" / "public_logs" / "tlparse"


def default_inputs() -> list[Path]:
    logs = sorted(PUBLIC.glob("*.log")) if PUBLIC.is_dir() else []
    logs += sorted((ROOT / "tests" / "fixtures" / "trace").glob("*.log.gz"))
    logs += sorted((ROOT / "sample_logs").glob("*/*.tar.gz"))
    return logs


def _ingest(paths, db: Path, with_artifacts: bool) -> tuple[float, object]:
    import compilewatch.ingest.trace.parsers as registry
    from compilewatch.ingest.loader import ingest_paths
    from compilewatch.store import open_store

    original = registry.default_parsers
    if not with_artifacts:
        registry.default_parsers = lambda: tuple(p for p in original() if p.parse.__module__ != registry.artifact_records.__name__)
    try:
        store = open_store(db)
        t = time.perf_counter()
        report = ingest_paths(store, paths)
        elapsed = time.perf_counter() - t
    finally:
        registry.default_parsers = original
    assert report.ok, [(f.name, f.message) for f in report.files if f.status == "failed"]
    with store.write() as con:
        con.execute("CHECKPOINT")
    return elapsed, store


def _db_size(store) -> tuple[int, int]:
    """(file bytes, bytes in used blocks): the file keeps free blocks that later writes reuse."""
    with store.read() as con:
        used, block = con.execute("SELECT used_blocks, block_size FROM pragma_database_size()").fetchone()
    return store.db_path.stat().st_size, used * block


def _parse_cpu_s(paths, with_artifacts: bool) -> float:
    """CPU seconds (process time: steadier than wall time on a shared machine) to parse the plain
    and gzipped trace inputs into a counting sink."""
    import io

    from compilewatch.ingest.records import CountingSink
    from compilewatch.ingest.trace import TraceParser
    from compilewatch.ingest.trace.parsers import artifact_records, default_parsers

    parsers = tuple(p for p in default_parsers() if with_artifacts or p.parse.__module__ != artifact_records.__name__)
    total = 0.0
    for p in paths:
        if not p.name.endswith((".log", ".log.gz")):
            continue
        data = gzip.decompress(p.read_bytes()) if p.name.endswith(".gz") else p.read_bytes()
        t = time.process_time()
        tp = TraceParser(CountingSink(), parsers, raw_refs=p.name.endswith(".log"))   # as ingest reads it
        tp.feed(io.BytesIO(data))
        tp.close()
        total += time.process_time() - t
    return total


def _median_ms(fn, n: int = 20) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _log_bytes(paths) -> int:
    """Uncompressed TORCH_TRACE bytes of the inputs, bundles' trace/ files included."""
    total = 0
    for p in paths:
        if p.name.endswith(".log.gz"):
            total += len(gzip.decompress(p.read_bytes()))
        elif p.name.endswith(".log"):
            total += p.stat().st_size
        elif p.name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(p) as tar:
                for m in tar.getmembers():
                    if m.isfile() and "/trace/" in f"/{m.name}":
                        data = tar.extractfile(m).read()
                        total += len(gzip.decompress(data)) if m.name.endswith(".gz") else len(data)
    return total


def _page_kb(db: Path, run_id: str, cid: str, artifact_key: str) -> dict:
    from bench_pages import _payload_bytes
    from streamlit.testing.v1 import AppTest

    os.environ["COMPILEWATCH_DB"], os.environ["COMPILEWATCH_BOOTSTRAP"] = str(db), "0"
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.run()
    at.switch_page("views/run_detail.py")
    at.query_params.update({"run": run_id, "from": "2000-01-01", "to": "2100-01-01"})
    at.run()
    out = {"run": _payload_bytes(at) / 1024}
    at.selectbox(key="rd_cid").select(cid).run()
    out["compile id chosen"] = _payload_bytes(at) / 1024
    at.selectbox(key="rd_artifact").select(artifact_key).run()
    out["largest artifact opened"] = _payload_bytes(at) / 1024
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", nargs="*", type=Path, help="inputs (default: public logs, fixtures, sample_logs)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    paths = args.logs or default_inputs()
    from compilewatch.deepdive import artifacts

    with tempfile.TemporaryDirectory(prefix="cw-bench-deep-") as tmp:
        t_without, s_without = _ingest(paths, Path(tmp) / "without" / "cw.duckdb", False)
        t_with, s_with = _ingest(paths, Path(tmp) / "with" / "cw.duckdb", True)
        with s_with.read() as con:
            n, payload, stored, n_refs, payload_refs = con.execute(
                "SELECT count(*), sum(size_bytes), coalesce(sum(octet_length(payload_z)), 0), count(raw_offset), "
                "coalesce(sum(size_bytes) FILTER (raw_offset IS NOT NULL), 0) FROM artifacts").fetchone()
            run_id, file_id, line_no, cid, size = con.execute(
                "SELECT run_id, file_id, line_no, compile_id, size_bytes FROM artifacts WHERE compile_id IS NOT NULL "
                "ORDER BY size_bytes DESC LIMIT 1").fetchone()
            fetch_ms = _median_ms(lambda: artifacts.fetch(con, run_id, file_id, line_no))
            list_ms = _median_ms(lambda: artifacts.list_artifacts(con, run_id, cid))
        size_without, used_without = _db_size(s_without)
        size_with, used_with = _db_size(s_with)
        kb = _page_kb(s_with.db_path, run_id, cid, f"{file_id}:{line_no}")
    logs = _log_bytes(paths)
    cpu_without, cpu_with = _parse_cpu_s(paths, False), _parse_cpu_s(paths, True)
    figures = {
        "parse_cpu_s_without": cpu_without, "parse_cpu_s_with": cpu_with,
        "inputs": len(paths), "trace_log_mb": logs / 1e6, "artifacts": n,
        "payload_mb": payload / 1e6, "stored_compressed_mb": stored / 1e6,
        "artifacts_in_raw_copies": n_refs, "payload_in_raw_copies_mb": payload_refs / 1e6,
        "db_mb_without_artifacts": size_without / 1e6, "db_mb_with_artifacts": size_with / 1e6,
        "db_growth_mb": (size_with - size_without) / 1e6,
        "db_used_mb_without_artifacts": used_without / 1e6, "db_used_mb_with_artifacts": used_with / 1e6,
        "ingest_s_without": t_without, "ingest_s_with": t_with,
        "largest_artifact_kb": size / 1024, "fetch_largest_ms": fetch_ms, "list_compile_id_ms": list_ms,
        "run_detail_sent_kb": kb,
    }
    print(f"inputs: {len(paths)} files, {logs / 1e6:.1f} MB of TORCH_TRACE text (uncompressed)")
    print(f"artifacts: {n:,}, payloads {payload / 1e6:.2f} MB: {n_refs:,} ({payload_refs / 1e6:.2f} MB) left in the "
          f"raw copies of plain traces, the rest ({(payload - payload_refs) / 1e6:.2f} MB) stored zlib-compressed in "
          f"{stored / 1e6:.2f} MB ({stored / max(payload - payload_refs, 1):.0%})")
    print(f"database after CHECKPOINT: {size_without / 1e6:.1f} MB without artifacts, {size_with / 1e6:.1f} MB with "
          f"(+{(size_with - size_without) / 1e6:.1f} MB); in used blocks {used_without / 1e6:.1f} MB -> "
          f"{used_with / 1e6:.1f} MB (+{(used_with - used_without) / 1e6:.1f} MB, "
          f"{(used_with - used_without) / max(logs, 1):.0%} of the trace text)")
    print(f"ingest wall time: {t_without:.1f} s without artifacts, {t_with:.1f} s with ({t_with / max(t_without, 1e-9):.2f}x); "
          f"parsing the .log/.log.gz inputs: {cpu_without:.2f} CPU s without, {cpu_with:.2f} with "
          f"({cpu_with / max(cpu_without, 1e-9):.2f}x)")
    print(f"largest artifact {size / 1024:.0f} KiB: fetched {fetch_ms:.1f} ms (median of 20); "
          f"listing its compile id {list_ms:.1f} ms")
    print("Run detail sends: " + ", ".join(f"{k} {v:.0f} KB" for k, v in kb.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
