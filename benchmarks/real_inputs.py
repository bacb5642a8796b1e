"""Benchmark inputs of any size, built only from real logs, into a temporary folder (never committed).

    .venv/bin/python benchmarks/real_inputs.py --trace-mb 111 --text-mb 105 --out DIR

TORCH_TRACE: every trace in the sample_logs/ bundles (read out of their .tar.gz), the public tlparse
test logs beside the checkout (../shared/public_logs/tlparse/*.log) and tests/fixtures/trace/*.log.gz,
concatenated in turn until the size is reached. Traces whose envelopes carry a "rank" key are left
out: tlparse renders the first rank it meets and skips every other rank's records, which would let it
do less work than we do on the same bytes.

TORCH_LOGS text: every bundle's torch_logs.txt and the text fixtures (tests/fixtures/text/*.log),
concatenated in turn the same way.
"""
from __future__ import annotations

import argparse
import gzip
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PUBLIC = (REPO / ".." / "shared" / "public_logs" / "tlparse").resolve()


def _bundle_members(role_suffix: str) -> list[bytes]:
    out = []
    for archive in sorted((REPO / "sample_logs").glob("*/*.tar.gz")):
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if not m.isfile():
                    continue
                name = m.name
                wanted = ("/trace/" in name) if role_suffix == "trace" else name.endswith("/torch_logs.txt")
                if wanted:
                    data = tf.extractfile(m).read()
                    out.append(gzip.decompress(data) if name.endswith(".gz") else data)
    return out


def trace_sources() -> list[bytes]:
    logs = _bundle_members("trace")
    if PUBLIC.is_dir():
        logs += [p.read_bytes() for p in sorted(PUBLIC.glob("*.log"))]
    logs += [gzip.decompress(p.read_bytes()) for p in sorted((REPO / "tests" / "fixtures" / "trace").glob("*.log.gz"))]
    return _ended([d for d in logs if b'"rank":' not in d])


def text_sources() -> list[bytes]:
    logs = _bundle_members("text")
    logs += [p.read_bytes() for p in sorted((REPO / "tests" / "fixtures" / "text").glob("*.log"))]
    return _ended(logs)


def _ended(logs: list[bytes]) -> list[bytes]:
    # each piece must end on a newline, or its last line would run into the next one's first
    return [d if d.endswith(b"\n") else d + b"\n" for d in logs if d.strip()]


def build(sources: list[bytes], target_mb: float, dest: Path) -> int:
    """Write `sources` in turn, again and again, until dest holds at least target_mb MB."""
    if not sources:
        sys.exit("no real logs found to build the benchmark input from")
    size = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as out:
        while size < target_mb * 1e6:
            for d in sources:
                out.write(d)
                size += len(d)
                if size >= target_mb * 1e6:
                    break
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace-mb", type=float, default=111, help="0: no trace")
    ap.add_argument("--text-mb", type=float, default=105, help="0: no text log")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.trace_mb:
        tr = trace_sources()
        n = build(tr, args.trace_mb, args.out / "trace.log")
        print(f"{args.out / 'trace.log'}: {n / 1e6:.1f} MB from {len(tr)} real traces")
    if args.text_mb:
        tx = text_sources()
        n = build(tx, args.text_mb, args.out / "torch_logs.txt")
        print(f"{args.out / 'torch_logs.txt'}: {n / 1e6:.1f} MB from {len(tx)} real text logs")


if __name__ == "__main__":
    main()
