"""Render a report in headless Chromium and save a PNG: the page as a reader's browser shows it.

A report is checked the way a person reads it: fonts, figure sizes and table widths only show
their problems in a browser. Chromium's ``--screenshot`` captures the window, not the whole page,
so the window is made tall and the blank space below the page is trimmed off afterwards. A page
is known to be whole only when the capture ends in at least ``MIN_BLANK`` px of background (far
more than any gap inside a report, about 70 px); otherwise the capture is retried with a taller
window, up to ``MAX_HEIGHT``. ``--tile`` also cuts the page into screen-sized PNGs that are easy
to look at one by one.

    python -m mnemoflow.report.screenshot results/report.html results/report.png --tile 1600

Chromium is Debian's ``chromium`` package (``apt-get install -y chromium``). It runs with a
throw-away profile and with everything that would reach the network switched off.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)

#: Background rows below the content that prove the page ended inside the window.
MIN_BLANK = 200
#: Tallest window tried (a 1280 x 48000 capture is about 250 MB of pixels in Chromium).
MAX_HEIGHT = 48000


class ScreenshotError(RuntimeError):
    pass


def find_chromium() -> str | None:
    """Path of a Chromium (or Chrome) executable on PATH, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def content_bottom(image: Image.Image) -> int:
    """One past the last row that differs from the background (bottom-right pixel); 0 if none."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    background = pixels[-1, -1]
    differs = np.abs(pixels - background).sum(axis=2) > 12
    rows = np.flatnonzero(differs.any(axis=1))
    return int(rows[-1]) + 1 if rows.size else 0


def trim(image: Image.Image, margin: int = 24) -> Image.Image:
    """Cut the uniform background below the last non-background row (keeping ``margin`` px)."""
    bottom = content_bottom(image)
    if bottom == 0:
        return image
    return image.crop((0, 0, image.width, min(image.height, bottom + margin)))


def next_height(image: Image.Image, min_blank: int = MIN_BLANK) -> int | None:
    """None when ``image`` ends in ``min_blank`` px of background, else a taller window to try."""
    bottom = content_bottom(image)
    if image.height - bottom >= min_blank:
        return None
    return max(2 * image.height, bottom + 2 * min_blank)


def _capture(chromium: str, url: str, width: int, height: int, profile: str, timeout_s: float):
    raw = Path(profile) / f"page-{height}.png"
    command = [
        chromium,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--screenshot={raw}",
        url,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ScreenshotError(f"chromium did not finish within {timeout_s:.0f} s") from exc
    if result.returncode != 0 or not raw.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise ScreenshotError(
            f"chromium exited with {result.returncode} and no screenshot: " + " | ".join(tail)
        )
    with Image.open(raw) as image:
        image.load()
        return image.copy()


def screenshot(
    html_path: str | Path,
    png_path: str | Path,
    *,
    width: int = 1280,
    height: int = 12000,
    max_height: int = MAX_HEIGHT,
    chromium: str | None = None,
    timeout_s: float = 120.0,
) -> Path:
    """Render ``html_path`` at ``width`` px and save the trimmed full page to ``png_path``.

    ``height`` is the first window's; a page that does not end inside it is shot again in a
    taller window (see :func:`next_height`), up to ``max_height``.
    """
    html_path = Path(html_path).resolve()
    png_path = Path(png_path)
    if not html_path.is_file():
        raise ScreenshotError(f"{html_path}: no such report")
    chromium = chromium or find_chromium()
    if chromium is None:
        raise ScreenshotError(
            "no Chromium on PATH (looked for " + ", ".join(CANDIDATES) + "); "
            "install Debian's package: apt-get install -y chromium"
        )
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mnemoflow-chromium-") as profile:
        while True:
            image = _capture(chromium, html_path.as_uri(), width, height, profile, timeout_s)
            taller = next_height(image)
            if taller is None or height >= max_height:
                break
            # Grow from the window asked for, not the capture (which could come back shorter).
            height = min(max_height, max(taller, 2 * height))
        if taller is not None:
            print(
                f"warning: the page is taller than the {height}px window (max_height); "
                "the screenshot is cut off",
                file=sys.stderr,
            )
        trim(image).save(png_path)
    return png_path


def tiles(png_path: str | Path, tile_height: int) -> list[Path]:
    """Cut a page screenshot into ``<stem>-1.png``, ``<stem>-2.png``, ... of ``tile_height`` px."""
    png_path = Path(png_path)
    written = []
    with Image.open(png_path) as page:
        for index, top in enumerate(range(0, page.height, tile_height), start=1):
            tile = page.crop((0, top, page.width, min(page.height, top + tile_height)))
            path = png_path.with_name(f"{png_path.stem}-{index}.png")
            tile.save(path)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", help="the report's HTML file (the run's report.html)")
    parser.add_argument("png", help="where to save the screenshot")
    parser.add_argument("--width", type=int, default=1280, help="window width in px (1280)")
    parser.add_argument(
        "--height", type=int, default=12000, help="first window height in px (12000; grows)"
    )
    parser.add_argument("--tile", type=int, default=0, help="also save tiles of this height")
    args = parser.parse_args(argv)
    try:
        path = screenshot(args.html, args.png, width=args.width, height=args.height)
    except ScreenshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with Image.open(path) as image:
        print(f"{path}: {image.width}x{image.height} px")
    for tile in tiles(path, args.tile) if args.tile else []:
        print(tile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
