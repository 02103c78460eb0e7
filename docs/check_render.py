"""Opens pages of the built manual in headless Chromium (Debian's ``chromium`` package) and checks
each screenshot shows a rendered page: not blank, not an error page, the theme's styles applied
(the dark navigation bar on the left), text in the content area.

    python docs/check_render.py site [index.html api.html ...]

Exits 1 naming the page and what its screenshot lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

WIDTH, HEIGHT = 1280, 900


def screenshot(browser: str, page: str, png: str) -> None:
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{HEIGHT}",
            f"--screenshot={png}",
            "file://" + os.path.abspath(page),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def problems(png: str) -> list[str]:
    """What the screenshot lacks of a rendered page of this theme."""
    from matplotlib import image

    pixels = image.imread(png)[:, :, :3]  # floats in [0, 1]
    height, width, _ = pixels.shape
    found = []
    if (height, width) != (HEIGHT, WIDTH):
        found.append(f"a {width}x{height} image, not {WIDTH}x{HEIGHT}")
    # the readthedocs theme's navigation bar: a dark column at the left edge
    nav = pixels[200:800, 5:200].mean(axis=2)
    if not (nav < 0.35).mean() > 0.5:
        found.append("no dark navigation bar on the left (the theme's styles did not load)")
    # the content: mostly light, with dark text on it
    content = pixels[100:800, 400:1200].mean(axis=2)
    light, dark = (content > 0.85).mean(), (content < 0.4).mean()
    if light < 0.6:
        found.append(f"a content area that is not a light page ({light:.0%} light pixels)")
    if dark < 0.005:
        found.append(f"no text in the content area ({dark:.2%} dark pixels)")
    return found


def main() -> int:
    site, pages = sys.argv[1], sys.argv[2:] or ["index.html", "api.html"]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("check_render: no chromium on the PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 1
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for page in pages:
            if not os.path.isfile(os.path.join(site, page)):
                print(f"check_render: no page {page} in {site}", file=sys.stderr)
                failed = True
                continue
            png = os.path.join(tmp, page.replace("/", "_") + ".png")
            screenshot(browser, os.path.join(site, page), png)
            found = problems(png)
            if found:
                failed = True
                kept = os.path.join(site, f"render-{page.replace('/', '_')}.png")
                shutil.copy(png, kept)
                print(f"check_render: {page}: {'; '.join(found)} (screenshot: {kept})", file=sys.stderr)
            else:
                print(f"check_render: {page} renders (theme, navigation, text)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
