"""`make screenshots`: the README's picture of the Lab (`docs/lab.png`), taken by the browser the tests drive.

In a fresh runs folder it trains a short CartPole lr_too_high run through the Lab in headless Chromium, applies the
diagnosis's fix, and photographs the comparison (both runs on the guide's panels, the two diagnoses side by side).
`--pages <dir>` also keeps a full-page shot of every page for a look by eye.

    python tests/app/screenshots.py [--out docs/lab.png] [--pages DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from browser import ROOT, chromium, explorer, explorer_env, open_page, start_lab_run  # noqa: E402

STEPS = 30
WIDTH, HEIGHT = 1440, 1180  # the browser's window
SHOWN_WIDTH = 1100  # the PNG's width (the README shows it smaller still)
MAX_BYTES = 200_000
PAGES = ["runs", "panels", "diagnosis", "sweeps", "workshop"]


def shrink(raw: Path, out: Path) -> int:
    """`raw` scaled to SHOWN_WIDTH and reduced to a 256-colour palette (a UI has few colours); returns the bytes."""
    from PIL import Image

    image = Image.open(raw).convert("RGB")
    image = image.resize((SHOWN_WIDTH, round(image.height * SHOWN_WIDTH / image.width)), Image.Resampling.LANCZOS)
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, optimize=True)
    return out.stat().st_size


def lab_fixed(page, timeout_ms: int = 240_000) -> None:
    """Train the short lr_too_high run in the Lab, apply its fix, and wait for the comparison."""
    from playwright.sync_api import expect

    start_lab_run(page, STEPS)
    expect(page.locator(".st-key-lab_run-lr_too_high-apply button")).to_be_visible(timeout=timeout_ms)
    expect(page.get_by_text(f"finished · step {STEPS}/{STEPS}").first).to_be_visible(timeout=timeout_ms)
    page.locator(".st-key-lab_run-lr_too_high-apply button").click()
    expect(page.get_by_text("lr_too_high: gone in the rerun").first).to_be_visible(timeout=timeout_ms)
    page.wait_for_timeout(3000)  # Vega draws the last frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "lab.png")
    parser.add_argument("--pages", type=Path, default=None, help="also keep a shot of every page here")
    args = parser.parse_args(argv)
    if chromium() is None:
        print("headless Chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        # the explorer runs in a scratch folder laid out like a checkout: the picture says "outputs/lab"
        shutil.copytree(ROOT / ".streamlit", Path(tmp) / ".streamlit")
        env = explorer_env(Path("outputs"))
        env["PLAYGROUND_WORKSHOP"] = str(Path(tmp) / "outputs" / "workshop")
        with explorer(env, Path(tmp) / "server.log", cwd=Path(tmp)) as (url, _), sync_playwright() as p:
            browser, page = open_page(p, url, WIDTH, HEIGHT)
            try:
                lab_fixed(page)
                page.mouse.move(0, 0)  # no hover highlights in the picture
                page.screenshot(path=Path(tmp) / "lab.png")
                if args.pages:
                    args.pages.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=args.pages / "lab.png", full_page=True)
                    for name in PAGES:
                        page.goto(f"{url}/{name}")
                        page.wait_for_timeout(6000)
                        page.screenshot(path=args.pages / f"{name}.png", full_page=True)
            finally:
                browser.close()
        size = shrink(Path(tmp) / "lab.png", args.out)
    print(f"{args.out}: {size / 1000:.0f} KB")
    return 0 if size < MAX_BYTES else 1


if __name__ == "__main__":
    raise SystemExit(main())
