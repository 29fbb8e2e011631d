"""OCR with the real Tesseract: scanned PDFs, image files, languages, and its absence."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from reportlab.pdfgen import canvas

from ragline.ingest.parse import IngestError, OcrOptions, parse_file
from ragline.ingest.parse.ocr import Ocr, render_scale_cap
from ragline.ingest.prepare import ocr_options
from ragline.settings import Settings

LIMIT = 50_000_000
OCR = OcrOptions()

# Long enough (≈120 words) that a 95 % recall allows at most 6 misread words.
RECALL_TEXT = (
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


def wrap(text: str, width: int = 60) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def word_recall(expected: str, got: str) -> float:
    """Share of the expected words (with multiplicity) found in the OCR output."""

    def bag(text: str) -> Counter[str]:
        return Counter(re.findall(r"[a-z0-9]+", text.lower()))

    want, have = bag(expected), bag(got)
    return sum(min(n, have[w]) for w, n in want.items()) / sum(want.values())


def test_ocr_of_a_scanned_page_recovers_95_percent_of_its_words(
    tmp_path: Path, gen: ModuleType
) -> None:
    pdf = gen.write_scanned_pdf(tmp_path / "letter.pdf", [wrap(RECALL_TEXT)])
    doc = parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert doc.metadata["ocr_pages"] == [1]
    assert doc.metadata["ocr_languages"] == "eng"
    assert [b.page for b in doc.blocks] == [1]
    recall = word_recall(RECALL_TEXT, doc.body)
    print(f"OCR word recall: {recall:.4f} over {len(RECALL_TEXT.split())} words")
    assert recall >= 0.95


def test_a_scanned_pdf_keeps_its_page_numbers(tmp_path: Path, gen: ModuleType) -> None:
    pdf = gen.write_scanned_pdf(tmp_path / "bridge.pdf")
    doc = parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert doc.format == "pdf"
    assert [b.page for b in doc.blocks] == [1, 2]
    assert doc.metadata["ocr_pages"] == [1, 2]
    page2 = doc.body[doc.blocks[1].start : doc.blocks[1].end]
    assert word_recall(" ".join(gen.SCAN_PAGES[1]), page2) >= 0.95
    assert "Harbour Bridge" in page2


def test_only_pages_without_a_text_layer_are_ocred(tmp_path: Path, gen: ModuleType) -> None:
    scan = tmp_path / "scan.png"
    gen.render_page(["Appendix about tidal turbines"], width=1400, size=40).save(scan)
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf)
    pdf.drawString(72, 720, "Typed page about wave energy.")
    pdf.showPage()
    pdf.drawImage(str(scan), 0, 0, width=595, height=842)
    pdf.showPage()
    pdf.save()
    path = tmp_path / "mixed.pdf"
    path.write_bytes(buf.getvalue())
    doc = parse_file(path, path.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert doc.metadata["ocr_pages"] == [2]
    assert [b.page for b in doc.blocks] == [1, 2]
    assert doc.body.startswith("Typed page about wave energy.")
    assert "tidal turbines" in doc.body


def test_image_files_are_ocred_one_page_per_frame(tmp_path: Path, gen: ModuleType) -> None:
    first = gen.render_page(["Frame one lists the harbour cranes."], width=1400, size=40)
    second = gen.render_page(["Frame two lists the dry docks."], width=1400, size=40)
    tiff = tmp_path / "pages.tiff"
    first.save(tiff, save_all=True, append_images=[second])
    doc = parse_file(tiff, tiff.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert doc.format == "image"
    assert [b.page for b in doc.blocks] == [1, 2]
    assert "harbour cranes" in doc.body and "dry docks" in doc.body
    png = tmp_path / "note.png"
    first.convert("RGB").save(png)
    jpg = tmp_path / "note.jpg"
    first.convert("RGB").save(jpg, quality=90)
    for path in (png, jpg):
        assert (
            "harbour cranes" in parse_file(path, path.read_bytes(), max_bytes=LIMIT, ocr=OCR).body
        )


def test_unreadable_image_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    with pytest.raises(IngestError, match="unreadable image") as info:
        parse_file(bad, bad.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert info.value.source == str(bad)


def test_without_tesseract_the_message_says_what_to_install(
    tmp_path: Path, gen: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = gen.write_scanned_pdf(tmp_path / "scan.pdf")
    png = tmp_path / "scan.png"
    gen.render_page(["Some text"]).save(png)
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))  # tesseract unfindable
    for path in (pdf, png):
        with pytest.raises(IngestError) as info:
            parse_file(path, path.read_bytes(), max_bytes=LIMIT, ocr=OCR)
        message = str(info.value)
        assert message.startswith(f"{path}: ")
        assert "Tesseract OCR is not installed (no 'tesseract' command found)" in message
        assert "apt-get install tesseract-ocr" in message
        assert "RAGLINE_OCR_COMMAND" in message
    with pytest.raises(IngestError, match="no text layer on any of its 2 pages"):
        parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=OCR)


def test_a_missing_tesseract_command_setting_is_reported(tmp_path: Path, gen: ModuleType) -> None:
    pdf = gen.write_scanned_pdf(tmp_path / "scan.pdf")
    options = ocr_options(Settings(ocr_command=str(tmp_path / "bin" / "tesseract")))
    assert options is not None
    with pytest.raises(IngestError, match="Tesseract OCR is not installed"):
        parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=options)


def test_text_pages_survive_when_ocr_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf)
    pdf.drawString(72, 720, "Typed page about wave energy.")
    pdf.showPage()
    pdf.rect(50, 50, 200, 200, fill=1)
    pdf.showPage()
    pdf.save()
    path = tmp_path / "mixed.pdf"
    path.write_bytes(buf.getvalue())
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    doc = parse_file(path, path.read_bytes(), max_bytes=LIMIT, ocr=OCR)
    assert doc.body == "Typed page about wave energy."
    assert doc.metadata["pages_without_text"] == [2]
    assert "Tesseract OCR is not installed" in doc.metadata["ocr_error"]


def test_ocr_off_is_the_reason_given(tmp_path: Path, gen: ModuleType) -> None:
    assert ocr_options(Settings(ocr=False)) is None
    pdf = gen.write_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(IngestError, match=r"no text layer .* OCR is off \(RAGLINE_OCR=false\)"):
        parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=None)


def test_a_missing_language_pack_names_the_apt_package(tmp_path: Path, gen: ModuleType) -> None:
    pdf = gen.write_scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(IngestError, match=r"no language pack for zzz .*tesseract-ocr-zzz"):
        parse_file(pdf, pdf.read_bytes(), max_bytes=LIMIT, ocr=OcrOptions(languages="eng+zzz"))


def test_auto_languages_pick_the_pack_of_the_page(gen: ModuleType) -> None:
    french = (
        "Le conseil municipal a décidé de réparer le pont du port avant l'hiver. "
        "Les travaux coûteront environ quatre millions d'euros et dureront quatorze mois."
    )
    image = gen.render_page(wrap(french, 50), width=1600, size=40)
    text, used = Ocr(OcrOptions(languages="auto")).read(image)
    assert used == "fra"
    assert word_recall(french, text) >= 0.9
    english = gen.render_page(wrap(RECALL_TEXT, 60))
    assert Ocr(OcrOptions(languages="auto")).read(english)[1] == "eng"


def test_a_poster_sized_page_is_rendered_within_the_pixel_limit() -> None:
    a4 = render_scale_cap(595, 842, 89_478_485)
    assert a4 > 300 / 72  # an A4 page is rendered at the full 300 dpi
    poster = render_scale_cap(100 * 72, 100 * 72, 89_478_485)  # 100 × 100 inches
    assert (100 * 72 * poster) ** 2 <= 89_478_485 * 1.0001
    assert render_scale_cap(595, 842, None) == float("inf")
