"""OCR word recall and time per page by rendering resolution (RAGLINE_OCR_DPI).

A page of ~125 English words is drawn in DejaVu Sans at several sizes, saved as
a 200 dpi image-only PDF (a scan: no text layer), then parsed with OCR at each
resolution. Recall = share of the words (with multiplicity) found in the output.

    python benchmarks/ocr_dpi.py [--dpi 150 200 300 400] [--sizes 14 20 28]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from machine import load_average
from ragline.ingest.parse import OcrOptions, parse_file

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
TEXT = (
    "Tesseract reads printed pages line by line. The municipal archive scanned forty "
    "thousand letters written between 1850 and 1920, most of them by merchants, sailors "
    "and their families. Each letter was photographed at two hundred dots per inch, "
    "stored as a lossless image and catalogued by sender, recipient and date. Researchers "
    "asked for the full text, because searching by sender alone hid the everyday details "
    "they cared about: prices of grain and coal, the weather at sea, news of births and "
    "weddings. The archive therefore runs every page through optical character "
    "recognition, checks a sample of the results by hand, and publishes the corrected "
    "text beside the images. Words that the engine misreads are usually rare names, "
    "faded ink or numbers printed in unusual typefaces."
)


def scanned_page(size: int) -> Image.Image:
    """The text in ``size`` px type, wrapped to fit a 1700 px (8.5 in at 200 dpi) page."""
    font = ImageFont.truetype(FONT, size)
    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    lines: list[str] = []
    for word in TEXT.split():
        trial = f"{lines[-1]} {word}" if lines else word
        if lines and draw.textlength(trial, font=font) < 1450:
            lines[-1] = trial
        else:
            lines.append(word)
    for i, line in enumerate(lines):
        draw.text((120, 150 + i * int(size * 1.8)), line, font=font, fill=0)
    return image


def recall(got: str) -> float:
    want = Counter(re.findall(r"[a-z0-9]+", TEXT.lower()))
    have = Counter(re.findall(r"[a-z0-9]+", got.lower()))
    return sum(min(n, have[w]) for w, n in want.items()) / sum(want.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dpi", type=int, nargs="+", default=[150, 200, 300, 400])
    ap.add_argument("--sizes", type=int, nargs="+", default=[14, 20, 28])
    args = ap.parse_args()
    print(f"load average before: {load_average()}")
    print("| type (px at 200 dpi) | points | render dpi | word recall | seconds |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"scan-{size}.pdf"
            scanned_page(size).save(path, "PDF", resolution=200.0)
            for dpi in args.dpi:
                t0 = time.perf_counter()
                doc = parse_file(path, path.read_bytes(), max_bytes=10**9, ocr=OcrOptions(dpi=dpi))
                seconds = time.perf_counter() - t0
                print(
                    f"| {size} | {size * 72 / 200:.1f} | {dpi} | {recall(doc.body):.3f} "
                    f"| {seconds:.2f} |"
                )
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
