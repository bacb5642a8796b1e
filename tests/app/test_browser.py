"""The real dashboard in a real browser: `streamlit run app/main.py` on a free port, headless
Chromium through Playwright, a real TORCH_LOGS file uploaded through the file uploader, and its
graph break found on the hotspots page. A screenshot of every page goes to
test-artifacts/screenshots/ (git-ignored) for a person to look at.

    .venv/bin/pytest -m browser tests/app/test_browser.py

Skips (with the reason) where Playwright or /usr/bin/chromium is missing; never downloads a
browser. Every wait is bounded and the server is stopped in teardown whatever happens.
"""
from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from compilewatch.store import Store, open_store

from browser_support import ROOT, chromium_page, dashboard_server, missing_browser, upload_files, wait_for_app_idle

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
WAIT_MS = 60_000


def _main_pages() -> dict[str, tuple[str, str]]:
    """url_path -> (navigation title, heading its script shows via ui.page("...")), for every page
    app/main.py declares, in its order."""
    text = (ROOT / "app" / "main.py").read_text()
    pages = {}
    for call in re.findall(r"st\.Page\((.*?)\)", text, re.S):
        script = re.match(r"\s*[\"']([^\"']+\.py)[\"']", call)
        url_path = re.search(r"url_path=[\"']([^\"']+)[\"']", call)
        title = re.search(r"title=[\"']([^\"']+)[\"']", call)
        if not (script and url_path and title):
            continue
        source = (ROOT / "app" / script.group(1)).read_text()
        heading = re.search(r"ui\.page\(\s*[\"']([^\"']+)[\"']", source)
        pages[url_path.group(1)] = (title.group(1), heading.group(1) if heading else "")
    return pages


def _breaks_in(path: Path) -> int:
    """Graph-break records in a TORCH_LOGS file, or in the torch_logs.txt of a bundle archive."""
    if path.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as tf:
            return sum(tf.extractfile(m).read().count(b"Graph Break Reason:")
                       for m in tf.getmembers() if m.isfile() and m.name.endswith("torch_logs.txt"))
    return path.read_bytes().count(b"Graph Break Reason:")


def _log_with_graph_break() -> Path:
    """Real logs with a graph break: the collector bundle in sample_logs/ with the most breaks (a
    real run's TORCH_LOGS + TORCH_TRACE, uploaded as the .tar.gz a collector writes), else the
    TORCH_LOGS fixture recorded with torch 2.13."""
    bundles = sorted((ROOT / "sample_logs").rglob("*.tar.gz"))
    scored = sorted(((_breaks_in(p), str(p)) for p in bundles), key=lambda x: (-x[0], x[1]))
    if scored and scored[0][0] > 0:
        return Path(scored[0][1])
    fixture = ROOT / "tests" / "fixtures" / "text" / "torch2.13_graph_breaks.log"
    if fixture.is_file() and _breaks_in(fixture):
        return fixture
    pytest.skip("no real log with a graph break in sample_logs/ or tests/fixtures/text/")


def _stored_break_type(store: Store) -> str:
    """The most frequent break type the upload stored: what the hotspots page must show."""
    with store.read() as con:
        row = con.execute("SELECT gb_type, count(*) FROM graph_breaks WHERE gb_type IS NOT NULL "
                          "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1").fetchone()
    assert row, "the upload stored no typed graph break"
    return row[0]


def _wait_heading(page, heading: str) -> None:
    if heading:
        page.get_by_role("heading", name=heading).first.wait_for(timeout=WAIT_MS)
    else:
        page.locator("h1").first.wait_for(timeout=WAIT_MS)
    wait_for_app_idle(page, WAIT_MS)


def _nav_to(page, pages: dict, url_path: str) -> None:
    """Follow the sidebar link, as a person would."""
    title, heading = pages[url_path]
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click(timeout=WAIT_MS)
    _wait_heading(page, heading)


def _nav_titles(page) -> list[str]:
    return [a.inner_text().strip().split("\n")[-1] for a in page.locator('[data-testid="stSidebarNav"] a').all()]


def _grid_cell(page, text: str):
    return page.locator('[role="gridcell"]', has_text=text).first


def _shot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _exceptions(page) -> list[str]:
    return [e.inner_text()[:300] for e in page.locator('[data-testid="stException"]').all()]


def test_upload_a_log_and_find_its_graph_break(tmp_path):
    reason = missing_browser()
    if reason:
        pytest.skip(reason)
    log = _log_with_graph_break()
    db = tmp_path / "store" / "compilewatch.duckdb"
    store = open_store(db)
    pages = _main_pages()
    assert "upload" in pages and "hotspots" in pages, f"app/main.py pages: {pages}"

    with dashboard_server(db, log_path=tmp_path / "server.log") as base, chromium_page() as page:
        page.goto(base + "/", timeout=WAIT_MS)
        _wait_heading(page, next(iter(pages.values()))[1])

        # upload through the file uploader, as a person would
        _nav_to(page, pages, "upload")
        upload_files(page, [log], timeout_ms=WAIT_MS)
        ingest = page.get_by_role("button", name="Ingest")
        page.wait_for_function(
            "() => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith('Ingest') && !b.disabled)",
            timeout=WAIT_MS)
        ingest.click()
        page.get_by_text(re.compile(r"\b[1-9]\d* stored\b")).first.wait_for(timeout=WAIT_MS)
        _grid_cell(page, log.name).wait_for(state="attached", timeout=WAIT_MS)
        _shot(page, "upload")
        assert _exceptions(page) == []

        # the hotspots page lists the break; searching for it keeps it on the page
        gb_type = _stored_break_type(store)
        _nav_to(page, pages, "hotspots")
        # st.dataframe draws on a canvas; its accessible grid cells carry the text
        _grid_cell(page, gb_type).wait_for(state="attached", timeout=WAIT_MS)
        search = page.get_by_label("Search break type, reason, file or function")
        search.fill(gb_type)
        search.press("Enter")
        page.wait_for_url(re.compile(r"[?&]q="), timeout=WAIT_MS)
        wait_for_app_idle(page, WAIT_MS)
        _shot(page, "hotspots")
        _grid_cell(page, gb_type).wait_for(state="attached", timeout=WAIT_MS)
        assert page.get_by_text(gb_type[:40], exact=False).first.is_visible()  # the chart's label
        assert _exceptions(page) == []

        # every other page renders without an exception; a screenshot of each
        failures = {}
        for url_path in pages:
            if url_path in ("upload", "hotspots"):
                continue
            _nav_to(page, pages, url_path)
            page.wait_for_timeout(500)  # charts draw after the script finishes
            _shot(page, url_path)
            if _exceptions(page):
                failures[url_path] = _exceptions(page)
        assert failures == {}, failures


def test_deep_link_on_a_fresh_server_gets_the_declared_navigation(tmp_path):
    """A link pasted in the meeting chat is often the first request a restarted server sees: it gets
    main.py's st.navigation sections and wide layout (a folder named pages/ next to main.py would
    make Streamlit run the page script alone)."""
    reason = missing_browser()
    if reason:
        pytest.skip(reason)
    db = tmp_path / "store" / "compilewatch.duckdb"
    open_store(db)
    pages = _main_pages()
    url_path = "hotspots" if "hotspots" in pages else next(iter(pages))
    with dashboard_server(db, log_path=tmp_path / "server.log") as base, chromium_page() as page:
        page.goto(f"{base}/{url_path}", timeout=WAIT_MS)
        _wait_heading(page, pages[url_path][1])
        page.wait_for_timeout(1000)
        _shot(page, f"deep_link_{url_path}")
        assert _nav_titles(page) == [title for title, _ in pages.values()]
        # A team server shows no Deploy button or developer menu (client.toolbarMode).
        assert page.get_by_test_id("stAppDeployButton").count() == 0
        assert page.get_by_text("Deploy", exact=True).count() == 0


def test_the_sample_log_overview_reads_as_a_verdict(tmp_path):
    """The sample logs' GPU team job in a real browser: the Overview leads with one headline per
    model and hardware, and the breaks version's warm-cache compile-time regression is there for
    both GPUs, in words, with the new graph break's file:line; the speedup is not blended across
    hardware kinds."""
    reason = missing_browser()
    if reason:
        pytest.skip(reason)
    from compilewatch.ingest.loader import ingest_paths
    paths = sorted(p for d in ("gpu-h100-torch2.11", "gpu-h200-torch2.11")
                   for p in (ROOT / "sample_logs" / d).glob("llama-*.tar.gz"))
    paths += sorted((ROOT / "sample_logs" / "cpu-torch2.13").glob("*.tar.gz"))
    db = tmp_path / "store" / "compilewatch.duckdb"
    assert ingest_paths(open_store(db), paths).ok
    pages = _main_pages()
    with dashboard_server(db, log_path=tmp_path / "server.log") as base, chromium_page(height=2400) as page:
        page.goto(base + "/", timeout=WAIT_MS)
        _wait_heading(page, next(iter(pages.values()))[1])
        page.get_by_text("llama-pretrain on NVIDIA H200 ×1 got worse", exact=False).first.wait_for(timeout=WAIT_MS)
        wait_for_app_idle(page, WAIT_MS)
        _shot(page, "overview_sample_logs")
        text = page.inner_text("[data-testid=stMain]")
        for hw in ("NVIDIA H100 80GB HBM3 ×1", "NVIDIA H200 ×1"):
            head = next(line for line in text.splitlines() if line.startswith(f"llama-pretrain on {hw} got worse"))
            assert "train_llama.py:155" in head and "compile time [warm cache] +" in head, head
        assert "Speedup and compile time are figures of one kind of hardware" in text
        assert _exceptions(page) == []
