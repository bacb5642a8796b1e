"""The report on real runs: HTML that opens in headless Chromium with every network request
blocked and shows its charts (screenshot kept in test-artifacts/review_report.png), and Markdown
that carries the same verdicts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.review import report, series
from compilewatch.review.baseline import parse_spec
from compilewatch.review.weekly import review
from compilewatch.store import open_store

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("COMPILEWATCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def cold_cache_review(samples_db):
    """resnet50 default/train on the H200: the first run compiled with a cold inductor cache (21 s)
    against two warm runs (2.7-2.9 s): a suspicious compile time that the cache explains."""
    with open_store(samples_db).read() as con:
        runs = series.select_runs(con, "rv.model = 'resnet50' AND rv.label = 'default/train'", [])
        first, rest = runs["run_id"].iloc[0], list(runs["run_id"].iloc[1:])
        return review(con, parse_spec(",".join(f"run={r}" for r in rest)), parse_spec(f"run={first}"))


def test_markdown_has_the_verdict_and_its_evidence(cold_cache_review):
    # log content is escaped for Markdown (safetext); read it back without the escapes
    md = report.to_markdown(cold_cache_review).replace("\\", "")
    assert "## Got worse" in md and "Suspicious: resnet50 · NVIDIA H200 ×1 · Compile time" in md
    assert "cold cache" in md and "collectors.bench_worker --model resnet50" in md
    assert "| Model | Hardware |" in md


def test_html_opens_offline_and_shows_its_charts(cold_cache_review, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = tmp_path / "review.html"
    page_file.write_text(report.to_html(cold_cache_review), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "review_report.png"
    blocked: list[str] = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.route("**/*", route)
            page.goto(page_file.as_uri(), wait_until="load")
            assert page.locator("h2#worse").inner_text() == "Got worse"
            charts = page.locator(".chart svg")
            assert charts.count() >= 1
            # the chart drew its runs: one point per run (3) and the baseline median rule
            marks = page.locator(".chart svg path.mark-symbol, .chart svg .mark-symbol path")
            assert marks.count() >= 3, page.locator(".chart").first.inner_html()[:500]
            box = charts.first.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 100
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert blocked == [], f"the report tried to fetch {blocked}"
    assert shot.stat().st_size > 10_000
    print(f"report screenshot: {shot}")


def test_report_cli_writes_both_formats(samples_db, tmp_path):
    for name in ("r.html", "r.md"):
        out = tmp_path / name
        p = subprocess.run([sys.executable, "-m", "compilewatch", "report", "--db", str(samples_db),
                            "--baseline", "torch=2.13", "--candidate", "torch=2.14", "--out", str(out)],
                           capture_output=True, text=True, cwd=REPO)
        assert p.returncode == 0, p.stderr
        text = out.read_text()
        assert "Per model and hardware" in text and "CPU ×1" in text
    bad = subprocess.run([sys.executable, "-m", "compilewatch", "report", "--db", str(samples_db),
                          "--out", str(tmp_path / "r.pdf")], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "html or *.md" in bad.stderr
