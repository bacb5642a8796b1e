"""Log content is data: a real TORCH_LOGS log (tests/fixtures/text/torch2.13_graph_breaks.log,
recorded with torch 2.13) whose graph-break type, explanation, hint and user file name were
rewritten to hold Markdown links, remote images, HTML with <script>, backticks, LaTeX and ANSI
escapes, packed in a bundle whose manifest carries the same in model, label, git commit and GPU
name. It is ingested for real, then every page is opened in headless Chromium with a dialog
listener and a request log, and the DOM is checked: no link or image made from log content, no
request to the tracker the content points at, and the hostile text visible as the characters it is.

    .venv/bin/pytest -m browser tests/app/test_hostile_content.py
"""
from __future__ import annotations

import http.server
import json
import re
import tarfile
import threading
from pathlib import Path

import pytest

from compilewatch.ingest.bundle import Manifest, write_manifest
from compilewatch.ingest.loader import ingest_paths
from compilewatch.store import open_store

from browser_support import ROOT, chromium_page, dashboard_server, free_port, missing_browser, wait_for_app_idle

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

REAL_LOG = ROOT / "tests" / "fixtures" / "text" / "torch2.13_graph_breaks.log"
SHOTS = ROOT / "test-artifacts" / "screenshots" / "hostile"


class _Tracker(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        _Tracker.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *a):
        pass


def _hostile(tracker: str) -> dict[str, str]:
    img = f"![px]({tracker}/pixel.png)"
    link = f"[click here]({tracker}/phish)"
    return {
        "gb_type": f"EVIL {link} {img} <img src={tracker}/raw.png onerror=alert(1)> `tick` $x^2$ :red[red]",
        "explanation": f"Explanation: {link}\n\n{img} <script>alert('x')</script> \x1b[2J\x1b]0;title\x07 **bold**",
        "hint": f"Hint: {img} <a href={tracker}/a>a</a> ```` `",
        "file": "/srv/app/evil`[f](TRACKER/file)`.py".replace("TRACKER", tracker),
        "manifest": f"{link} {img} <b>x</b> `c`",
    }


def _craft(tmp: Path, tracker: str) -> Path:
    h = _hostile(tracker)
    text = REAL_LOG.read_text()
    assert "Failed to trace builtin operator" in text
    text = (text.replace("Failed to trace builtin operator", h["gb_type"].replace("\n", " "))
            .replace("Explanation: Dynamo does not know how to trace builtin operator",
                     h["explanation"].split("\n")[0] + " " + h["explanation"].split("\n")[-1] + " trace")
            .replace("Hint: Please report an issue to PyTorch.", h["hint"]))
    # the user file the log names, wherever the fixture was made
    text = re.sub(r"/\S*/tests/fixtures/text/prog_graph_breaks\.py", lambda _: h["file"], text)
    bundle = tmp / "evil-bundle"
    bundle.mkdir()
    (bundle / "torch_logs.txt").write_text(text)
    write_manifest(bundle, Manifest(run_id="evil-run", model="m " + h["manifest"], label="l " + h["manifest"],
                                    git_commit="c " + h["manifest"], gpu_name="g " + h["manifest"],
                                    torch_version="2.13.0", command=["python", h["manifest"]],
                                    started_at="2026-11-22T01:54:11Z", host="h " + h["manifest"]))
    archive = tmp / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(bundle, arcname="evil-bundle")
    return archive


def test_log_content_never_renders_on_any_page(tmp_path):
    why = missing_browser()
    if why:
        pytest.skip(why)
    tport = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", tport), _Tracker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tracker = f"http://127.0.0.1:{tport}"
    _Tracker.hits = []
    db = tmp_path / "store" / "cw.duckdb"
    store = open_store(db)
    rep = ingest_paths(store, [_craft(tmp_path, tracker)])
    assert all(f.status in ("stored", "partial") for f in rep.files), [(f.name, f.message) for f in rep.files]
    with store.read() as con:
        gb = con.execute("SELECT gb_type, explanation, hints, user_file FROM graph_breaks "
                         "WHERE gb_type LIKE 'EVIL%' LIMIT 1").fetchall()
    assert gb, "the crafted break was parsed (else the pages would show nothing hostile)"
    assert "![px](" in gb[0][0] and "<script>" in (gb[0][1] or "") and "`[f](" in (gb[0][3] or "")
    break_key = None
    with store.read() as con:
        break_key = con.execute("SELECT break_key FROM graph_breaks WHERE gb_type LIKE 'EVIL%' LIMIT 1").fetchall()
    SHOTS.mkdir(parents=True, exist_ok=True)
    from urllib.parse import urlencode
    window = {"from": "2026-11-01", "to": "2026-11-30"}
    pages = {
        "overview": "overview?" + urlencode(window),
        "hotspots": "hotspots?" + urlencode({**window, "break": break_key[0][0]} if break_key and break_key[0][0] else window),
        "recompiles": "recompiles?" + urlencode(window),
        "trends": "trends?" + urlencode(window),
        "run": "run?" + urlencode({**window, "run": "evil-run"}),
        "compare": "compare?" + urlencode(window),
        "upload": "upload",
    }
    dialogs, foreign = [], []
    try:
        with dashboard_server(db, log_path=tmp_path / "server.log") as url, chromium_page() as page:
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("request", lambda r: None if r.url.startswith(url) or r.url.startswith("data:")
                    else foreign.append(r.url))
            for name, path in pages.items():
                page.goto(f"{url}/{path}")
                wait_for_app_idle(page, 60_000)
                page.wait_for_timeout(1500)  # images and iframes get their chance to load
                wait_for_app_idle(page, 60_000)
                page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
                made = page.evaluate(r"""(t) => ({
                    links: [...document.querySelectorAll('a[href]')].map(a => a.href)
                             .filter(h => h.startsWith(t) || !h.startsWith(location.origin))
                             // the graph-break registry page the app builds from a break's gbNNNN id
                             .filter(h => !/^https:\/\/meta-pytorch\.github\.io\/compile-graph-break-site\/gb\/gb\d{4}\.html$/.test(h)),
                    images: [...document.querySelectorAll('img[src], image, iframe[src]')]
                              .map(i => i.src || i.href?.baseVal || '').filter(s => s.startsWith(t)),
                    scripts: [...document.querySelectorAll('script')].filter(s => s.textContent.includes("alert")).length,
                    where: [...document.querySelectorAll('a[href]')].filter(a => a.href.startsWith(t))
                             .map(a => (a.closest('[data-testid]')||a.parentElement).getAttribute('data-testid') + ' :: ' + (a.closest('[data-testid]')||a).outerHTML.slice(0, 300)),
                    exceptions: document.querySelectorAll('[data-testid="stException"]').length,
                    text: document.body.innerText.replaceAll("\u2060", ""),
                })""", tracker)
                assert made["links"] == [] and made["images"] == [], (name, made["where"], made["images"])
                assert made["scripts"] == 0 and made["exceptions"] == 0, name
                if name in ("hotspots", "run"):
                    assert "](" + tracker in made["text"], f"{name}: the hostile text is shown literally"
                if name == "run":
                    for needle in ("m [click here](", "g [click here](", "c [click here]("):
                        assert needle in made["text"], (name, needle)
                if name == "hotspots":
                    assert "<script>alert('x')</script>" in made["text"] and "evil`[f](" in made["text"]
        # The HTML report of `compilewatch report` over the same store, opened in Chromium too.
        import subprocess
        import sys
        for fmt in ("html", "md"):
            out = tmp_path / f"report.{fmt}"
            done = subprocess.run([sys.executable, "-m", "compilewatch", "report", "--db", str(db), "--since", "60d",
                                   "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
        html_text = (tmp_path / "report.html").read_text()
        assert "EVIL" in html_text, "the crafted break is in the report (else nothing is tested)"
        assert f"<img src={tracker}" not in html_text and f'href="{tracker}' not in html_text
        assert "<script>alert" not in html_text
        md_text = (tmp_path / "report.md").read_text()
        assert "EVIL" in md_text
        from markdown_it import MarkdownIt  # rich's Markdown renderer: CommonMark with GFM tables
        rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md_text)
        assert "EVIL" in rendered and "<img" not in rendered and "<a " not in rendered and "<script" not in rendered
        with chromium_page() as page:
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("request", lambda r: foreign.append(r.url) if r.url.startswith(tracker) else None)
            page.goto((tmp_path / "report.html").as_uri())
            page.wait_for_timeout(1000)
            assert page.evaluate("(t) => document.querySelectorAll(`a[href^='${t}'], img[src^='${t}']`).length",
                                 tracker) == 0
            assert "![px](" in page.evaluate("document.body.innerText")
            page.screenshot(path=str(SHOTS / "report.png"), full_page=True)
    finally:
        server.shutdown()
    assert dialogs == []
    # The one outside request is Streamlit fetching the page icon (:material/speed:) from Google's
    # font CDN: the app's own configuration, the same for every page, never content.
    assert _Tracker.hits == [] and not any(u.startswith(tracker) for u in foreign), (foreign, _Tracker.hits)
    assert {u.split("/")[2] for u in foreign} <= {"fonts.gstatic.com"}, foreign
    assert "Traceback" not in (tmp_path / "server.log").read_text()
