"""What the graph fingerprints add to an ingest, per file, on the real traces of sample_logs/ and
tests/fixtures: the same files ingested with them and without them, in the same run.

    .venv/bin/python benchmarks/bench_fingerprints.py [--repeat 3] [--only SUBSTRING]

Inputs: every TORCH_TRACE in the sample_logs/ bundles (read out of their .tar.gz, kept gzipped or
plain as the collector wrote them), tests/fixtures/trace/*.log.gz and the traces of the
tests/fixtures/graphs bundles. Each file is ingested on its own (``ingest_paths``: parse, commit,
its run's rollups) into a store per variant and repeat, made before the clocks start; the variants
alternate, and the best of --repeat is kept per file and variant. "Without" is the same code with the parser's fingerprint made nothing
(``artifacts.payload_fingerprint``) and the rollup of them (``rollup_frame_fingerprints``) not
refreshed. Figures are process CPU milliseconds (the compressor's thread and DuckDB's included:
a figure a shared machine's load moves less than wall time) and wall milliseconds.

Also printed: the fingerprinting alone, per MB of the payloads it reads (the graphs, guards and
output code), and the rollup's refresh alone, per run. Page loads: no page query reads the rollup
(the review reads it for the groups it judges), so the Overview pays nothing.
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compilewatch.ingest.formats.artifact_text import PARTS, fingerprint  # noqa: E402
from compilewatch.ingest.loader import ingest_paths  # noqa: E402
from compilewatch.ingest.records import CountingSink  # noqa: E402
from compilewatch.ingest.trace import envelope  # noqa: E402
from compilewatch.ingest.trace.parsers import artifacts  # noqa: E402
from compilewatch.store import open_store, rollups  # noqa: E402


def traces(out: Path) -> list[Path]:
    """Every real trace, one file each under `out`."""
    paths = sorted((ROOT / "tests" / "fixtures" / "trace").glob("*.log.gz"))
    bundles = sorted((ROOT / "sample_logs").glob("*/*.tar.gz")) + sorted((ROOT / "tests" / "fixtures" / "graphs").glob("*.tar.gz"))
    for archive in bundles:
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if m.isfile() and "/trace/" in m.name:
                    dest = out / f"{archive.parent.name}__{archive.name.removesuffix('.tar.gz')}__{Path(m.name).name}"
                    dest.write_bytes(tf.extractfile(m).read())
                    paths.append(dest)
    return paths


def use(with_fp: bool, saved: tuple) -> None:
    """The parser's fingerprint and the rollup of them in place (the code as it is), or made nothing."""
    prepare, table = saved
    artifacts.payload_fingerprint = prepare if with_fp else (lambda env: None)
    if with_fp:
        rollups._ROLLUPS["rollup_frame_fingerprints"] = table
    else:
        rollups._ROLLUPS.pop("rollup_frame_fingerprints", None)


def ingest_ms(store, path: Path) -> tuple[float, float]:
    """(CPU ms, wall ms) of one file's ingest into `store`: parse, commit and its run's refresh."""
    c0, w0 = time.process_time(), time.perf_counter()
    report = ingest_paths(store, [path])
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    assert report.ok, [(f.name, f.message) for f in report.files]
    return cpu * 1000, wall * 1000


def fingerprint_cost(path: Path) -> tuple[int, float]:
    """(bytes of fingerprinted payloads, CPU ms to fingerprint them) of one trace."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    payloads = []
    reader = envelope.EnvelopeReader(CountingSink(), envelope.TraceStats())
    for env in reader.envelopes(data.splitlines(keepends=True)):
        if env.name in PARTS and env.payload_bytes is not None:
            payloads.append((env.name, env.payload_bytes))
    c0 = time.process_time()
    for name, raw in payloads:
        fingerprint(name, raw.decode("utf-8", "replace"))
    return sum(len(p) for _, p in payloads), (time.process_time() - c0) * 1000


def rollup_ms(work: Path) -> float:
    """The fingerprint rollup's refresh alone for the runs of a store, ms per run (best of 3)."""
    store = open_store(work / "cw.duckdb")
    best = float("inf")
    with store.write() as con:
        runs = [r for (r,) in con.execute("SELECT run_id FROM runs").fetchall()]
        sql = rollups._ROLLUPS["rollup_frame_fingerprints"]
        for _ in range(3):
            c0 = time.perf_counter()
            for run in runs:
                con.execute("DELETE FROM rollup_frame_fingerprints WHERE run_id = $1", [run]).fetchall()
                con.execute(f"INSERT INTO rollup_frame_fingerprints {sql.replace('{flt}', 'run_id = $1')}", [run]).fetchall()
            best = min(best, (time.perf_counter() - c0) * 1000 / max(len(runs), 1))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="only the traces whose name holds this")
    args = ap.parse_args(argv)
    saved = (artifacts.payload_fingerprint, rollups._ROLLUPS["rollup_frame_fingerprints"])
    with tempfile.TemporaryDirectory(prefix="cw-bench-fp-") as tmp:
        tmp = Path(tmp)
        (tmp / "in").mkdir()
        paths = [p for p in traces(tmp / "in") if args.only in p.name]
        # a store per variant and repeat, opened (migrated) before any clock starts; each file is
        # then ingested on its own into each of them, the variants alternating
        stores = {}
        for r in range(args.repeat):
            for with_fp in (False, True):
                stores[(r, with_fp)] = open_store(tmp / f"s{r}-{int(with_fp)}" / "cw.duckdb")
                with stores[(r, with_fp)].read():
                    pass
        use(True, saved)
        warm = open_store(tmp / "warm" / "cw.duckdb")
        ingest_ms(warm, paths[0])   # imports, DuckDB's first statements: paid before any figure
        print(f"{len(paths)} real traces, best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")
        print(f"{'trace':62} {'MB':>6} {'fp MB':>6} {'without':>9} {'with':>9} {'added':>8}  (CPU ms; wall ms)")
        totals = [0.0, 0.0, 0.0, 0.0, 0, 0.0]
        for p in paths:
            best = {False: [float("inf")] * 2, True: [float("inf")] * 2}
            for r in range(args.repeat):
                for with_fp in ((False, True) if r % 2 == 0 else (True, False)):
                    use(with_fp, saved)
                    cpu, wall = ingest_ms(stores[(r, with_fp)], p)
                    best[with_fp] = [min(best[with_fp][0], cpu), min(best[with_fp][1], wall)]
            use(True, saved)
            size = p.stat().st_size
            fp_bytes, fp_ms = fingerprint_cost(p)
            (c0, w0), (c1, w1) = best[False], best[True]
            totals = [totals[0] + c0, totals[1] + c1, totals[2] + w0, totals[3] + w1, totals[4] + fp_bytes,
                      totals[5] + fp_ms]
            print(f"{p.name[-62:]:62} {size / 1e6:6.2f} {fp_bytes / 1e6:6.2f} {c0:9.1f} {c1:9.1f} {c1 - c0:+8.1f}"
                  f"  ({w0:.0f} -> {w1:.0f})", flush=True)
        n = len(paths)
        print(f"\nper file, mean: without {totals[0] / n:.1f} CPU ms, with {totals[1] / n:.1f} CPU ms, "
              f"added {(totals[1] - totals[0]) / n:+.1f} CPU ms ({(totals[1] - totals[0]) / totals[0] * 100:+.1f}%); "
              f"wall {totals[2] / n:.0f} -> {totals[3] / n:.0f} ms")
        print(f"fingerprinting alone: {totals[5]:.0f} CPU ms for {totals[4] / 1e6:.1f} MB of graphs, guards and "
              f"output code ({totals[5] / max(totals[4] / 1e6, 1e-9):.1f} ms per MB), {totals[5] / n:.1f} ms per file")
        print(f"the rollup's refresh alone: {rollup_ms(tmp / 's0-1'):.1f} ms per run, each of the {n} runs of a store "
              f"that holds them all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
