"""Write the Debian Reference, in one of its translations, as a BEIR-layout folder for
`ragline eval`, with our own questions per language (issue 29's second translated
corpus, and its German set).

The Debian Reference (Osamu Aoki, GPL-2+, Debian packages ``debian-reference-en``,
``-de``, ``-es``, ``-fr``, ``-pt``: ``apt-get install debian-reference-de`` …) is a system
administrator's guide whose translated prose is full of English commands, file
names and package names — the mixed pages issue 29 is about. Its HTML has the same
numbered sections in every language, so a section's number ("3.8.1") is a page id
that holds across translations. Each page here is one numbered section (a "1.2"
section without its "1.2.x" subsections, which are pages of their own), parsed by
ragline's own HTML parser (tables as pipe rows, code verbatim).

The corpus is the sections the questions of ``benchmarks/data/debref_questions.jsonl``
target plus ``--distractors`` others, spread over the book (every n-th section of at
least 300 characters, the same numbers in every language). The questions (20, written
for this set in English and translated by us into German, Spanish, French and
Portuguese) are judged relevant to their target section in the corpus language: the
corpus's own language measures same-language search, another language cross-language
search.

    python benchmarks/debref_beir.py --corpus-lang de --question-langs de --out /tmp/dr/de
    ragline eval /tmp/dr/de --report de.md

The folder written is a throw-away copy for one run; nothing of the book is committed.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bs4 import BeautifulSoup
from bs4.element import Tag

from benchlib import REPO, load_jsonl, write_beir
from ragline.ingest.parse.html import parse_html

DOCS = Path("/usr/share/doc/debian-reference-common/docs")
QUESTIONS = REPO / "benchmarks" / "data" / "debref_questions.jsonl"
LANGS = ["en", "de", "es", "fr", "pt"]
#: "3.8.1. The kernel module initialization" → ("3.8.1", title); appendices are "A.1".
_NUMBERED = re.compile(r"^\s*((?:\d+|[A-Z])(?:\.\d+)+)\.?\s*(.*)$", re.S)
_MIN_DISTRACTOR_CHARS = 300


def _own_heading(div: Tag) -> Tag | None:
    """The h2/h3 title of this section div (not of a nested one)."""
    for h in div.find_all(["h2", "h3"], class_="title"):
        if h.find_parent("div", class_="section") is div:
            return h
    return None


def sections(docs: Path, lang: str) -> dict[str, tuple[str, str]]:
    """Section number → (title, body) of every h2/h3 section of one translation."""
    out: dict[str, tuple[str, str]] = {}
    for page in sorted(docs.glob(f"*.{lang}.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for div in soup.find_all("div", class_="section"):
            head = _own_heading(div)
            numbered = _NUMBERED.match(head.get_text(" ", strip=True)) if head else None
            if head is None or numbered is None:
                continue
            own = BeautifulSoup(str(div), "html.parser").find("div", class_="section")
            assert isinstance(own, Tag)
            if head.name == "h2":  # its h3 subsections are pages of their own
                for sub in own.find_all("div", class_="section"):
                    sub_head = _own_heading(sub)
                    if sub_head is not None and sub_head.name == "h3":
                        sub.decompose()
            own_head = _own_heading(own)
            if own_head is not None:
                own_head.decompose()
            body = parse_html(str(own), f"{numbered.group(1)}.html").body.strip()
            out[numbered.group(1)] = (numbered.group(2).strip(), body)
    if not out:
        raise SystemExit(f"{docs}: no *.{lang}.html (apt-get install debian-reference-{lang})")
    return out


def pick(all_sections: dict[str, tuple[str, str]], targets: set[str], n: int) -> list[str]:
    """The targets plus ``n`` others spread evenly over the book (stable across runs
    and languages: chosen on the English book's section numbers and lengths)."""
    others = [
        num
        for num, (_, body) in all_sections.items()
        if num not in targets and len(body) >= _MIN_DISTRACTOR_CHARS
    ]
    step = max(1, len(others) // max(n, 1))
    return sorted(targets) + others[::step][:n]


def write_dataset(
    docs: Path, out: Path, corpus_lang: str, question_langs: list[str], n_distractors: int
) -> dict[str, int]:
    every = load_jsonl(QUESTIONS)
    questions = [q for q in every if q["lang"] in question_langs]
    targets = {q["target"] for q in every}
    chosen = pick(sections(docs, "en"), targets, n_distractors)
    book = sections(docs, corpus_lang)
    missing = sorted(set(chosen) - set(book))
    if missing:
        raise SystemExit(f"{corpus_lang}: sections {', '.join(missing)} not in this translation")
    docs = [{"_id": n, "title": book[n][0], "text": book[n][1]} for n in chosen]
    return write_beir(out, docs, questions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path, default=DOCS, help="the book's HTML folder")
    ap.add_argument("--corpus-lang", choices=LANGS, default="de")
    ap.add_argument("--question-langs", default=",".join(LANGS))
    ap.add_argument("--distractors", type=int, default=60)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    langs = [x for x in a.question_langs.split(",") if x]
    unknown = sorted(set(langs) - set(LANGS))
    if unknown:
        raise SystemExit(f"--question-langs: no questions in {', '.join(unknown)}")
    counts = write_dataset(a.docs, a.out, a.corpus_lang, langs, a.distractors)
    print(f"{a.out}: {counts['documents']} documents, {counts['queries']} queries")


if __name__ == "__main__":
    main()
