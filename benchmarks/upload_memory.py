"""The dashboard server's memory around one upload: before, once the file is uploaded (Streamlit
holds it in memory), and after the ingest (the page empties the uploader, so Streamlit drops it).
Issue 9.7 saw the server grow by the upload's size and stay there.

    .venv/bin/python benchmarks/upload_memory.py [--size-mb 150]

The file is a real TORCH_LOGS log (tests/fixtures/text/torch2.13_all.log) repeated to --size-mb;
the server is the real one (`streamlit run app/main.py` on a free port), driven by headless
Chromium. RSS is read from /proc/<pid>/status (VmRSS) of the server process.
"""
from __future__ import annotations

import argparse
import gc
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "app"))

from browser_support import chromium_page, dashboard_server, upload_files, wait_for_app_idle  # noqa: E402

LOG = ROOT / "tests" / "fixtures" / "text" / "torch2.13_all.log"


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024


def server_pid(url: str) -> int:
    port = url.rsplit(":", 1)[1]
    import subprocess

    out = subprocess.run(["ss", "-ltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return int(re.search(r"pid=(\d+)", out).group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=150)
    args = ap.parse_args(argv)
    from compilewatch.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big = tmp / "big_torch_logs.log"
        body = LOG.read_bytes()
        with open(big, "wb") as out:
            while out.tell() < args.size_mb * 2**20:
                out.write(body)
        size = big.stat().st_size / 2**20
        db = tmp / "store" / "cw.duckdb"
        open_store(db)
        with dashboard_server(db) as url, chromium_page(timeout_ms=600_000) as page:
            page.goto(url + "/upload")
            wait_for_app_idle(page, 120_000)
            pid = server_pid(url)
            before = rss_mb(pid)
            upload_files(page, [big])
            page.wait_for_function(
                "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith('Ingest') && !b.disabled)",
                timeout=600_000)
            time.sleep(2)
            uploaded = rss_mb(pid)
            page.get_by_role("button", name="Ingest").click()
            page.get_by_text(re.compile(r"\b1 (stored|partial)\b")).first.wait_for(timeout=600_000)
            wait_for_app_idle(page, 600_000)
            time.sleep(5)
            after = rss_mb(pid)
    print(f"upload of {size:,.0f} MiB (real TORCH_LOGS text) through the dashboard; server RSS:")
    print(f"  before upload          {before:8,.0f} MiB")
    print(f"  upload received        {uploaded:8,.0f} MiB  (+{uploaded - before:,.0f}: Streamlit holds the file)")
    print(f"  after ingest (+5 s)    {after:8,.0f} MiB  (+{after - before:,.0f} over before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
