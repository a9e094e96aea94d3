"""End-to-end: `streamlit run app` in a subprocess, driven by headless Chromium through Playwright.

Needs Debian's chromium (`apt-get install -y chromium`); skipped without it, except under CI=true where a
missing browser fails the test. Set EXPLORER_SHOTS=<dir> to keep the screenshots.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app_helpers import ROOT

pytestmark = pytest.mark.browser
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "headless Chromium not found: install it with `apt-get install -y chromium` (Debian/Ubuntu)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tree, tmp_path):
    """The explorer on a free loopback port over the fake tree; yields its URL."""
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the app did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def _ink(png: Path, box: dict) -> float:
    """The fraction of pixels in `box` that differ from the background (the most common colour)."""
    import numpy as np
    from PIL import Image

    image = Image.open(png).convert("RGB")
    region = image.crop((int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"])))
    pixels = np.asarray(region, dtype=np.int32).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    return float((np.abs(pixels - background).sum(axis=1) > 30).mean())


def test_browse_to_panels_and_see_charts(server, tree, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("EXPLORER_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    query = "&".join(f"run=outputs/2026-11-30/{t}" for t in ("09-00-00", "09-10-00"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{server}/?{query}")
            expect(page.get_by_role("heading", name="Runs", exact=True)).to_be_visible(timeout=60_000)
            expect(page.get_by_text("Shown (2)")).to_be_visible(timeout=30_000)
            page.screenshot(path=shots / "runs.png")
            page.get_by_test_id("stSidebarNav").get_by_text("Panels").click()
            expect(page.get_by_role("heading", name="Panels", exact=True)).to_be_visible(timeout=30_000)
            charts = page.locator("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg")
            expect(charts.nth(3)).to_be_visible(timeout=60_000)
            page.wait_for_timeout(1500)  # let Vega finish drawing the lines
            first = page.get_by_test_id("stVegaLiteChart").first
            box = first.bounding_box()
            page.screenshot(path=shots / "panels.png")
            assert box is not None and box["height"] > 150
            assert _ink(shots / "panels.png", box) > 0.02  # axes, band and lines, not a blank box
        finally:
            browser.close()
