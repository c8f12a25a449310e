"""Render a report in headless Chromium and save a PNG: the page as a reader's browser shows it.

A report is checked the way a person reads it: fonts, figure sizes and table widths only show
their problems in a browser. Chromium's ``--screenshot`` captures the window, not the whole page,
so the window is made tall and the blank space below the page is trimmed off afterwards;
``--tile`` also cuts the page into screen-sized PNGs that are easy to look at one by one.

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


class ScreenshotError(RuntimeError):
    pass


def find_chromium() -> str | None:
    """Path of a Chromium (or Chrome) executable on PATH, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def trim(image: Image.Image, margin: int = 24) -> Image.Image:
    """Cut the uniform background below the last non-background row (keeping ``margin`` px)."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    background = pixels[-1, -1]
    differs = np.abs(pixels - background).sum(axis=2) > 12
    rows = np.flatnonzero(differs.any(axis=1))
    if rows.size == 0:
        return image
    bottom = min(image.height, int(rows[-1]) + 1 + margin)
    return image.crop((0, 0, image.width, bottom))


def screenshot(
    html_path: str | Path,
    png_path: str | Path,
    *,
    width: int = 1280,
    height: int = 12000,
    chromium: str | None = None,
    timeout_s: float = 120.0,
) -> Path:
    """Render ``html_path`` at ``width`` px and save the trimmed full page to ``png_path``."""
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
        raw = Path(profile) / "page.png"
        command = [
            chromium,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={raw}",
            html_path.as_uri(),
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
            page = trim(image)
            if page.height >= height - 24:
                print(
                    f"warning: the page may be taller than the {height}px window; "
                    "pass a larger --height",
                    file=sys.stderr,
                )
            page.save(png_path)
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
    parser.add_argument("html", help="the report, e.g. results/report.html")
    parser.add_argument("png", help="where to save the screenshot")
    parser.add_argument("--width", type=int, default=1280, help="window width in px (1280)")
    parser.add_argument("--height", type=int, default=12000, help="window height in px (12000)")
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
