"""Write react.dev's translated docs as a BEIR-layout folder for `ragline eval`, its
questions tagged by language, so the eval reports hit@3 (recall@3) per language.

The corpus is one language's pages (``--corpus-lang``): the pages the questions of
``benchmarks/data/languages_questions.jsonl`` target plus ``--distractors`` other
pages found in every language (the same choice as ``benchmarks/languages.py``),
prose only (code blocks and interactive examples removed), each marked
``"format": "markdown"`` so the eval parses it as ingest parses the file. The queries are the
questions of ``--question-langs``, each judged relevant to its target page in the
corpus language: the corpus's own language measures same-language search, any
other language cross-language search (a Spanish question over the English pages).

    python benchmarks/react_beir.py --corpus-lang es --question-langs es --out /tmp/rb/es
    ragline eval /tmp/rb/es --modes hybrid-rrf --report es.md

The data stays in ``../shared/data/react-docs`` (CC BY 4.0); the folder written is
a throw-away copy for one run, never committed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchlib import REPO, load_jsonl, write_beir
from languages import _NOT_PROSE, LANGS, distractors

DATA = REPO.parent / "shared" / "data" / "react-docs"
QUESTIONS = REPO / "benchmarks" / "data" / "languages_questions.jsonl"


def write_dataset(
    data: Path, out: Path, corpus_lang: str, question_langs: list[str], n_distractors: int
) -> dict[str, int]:
    questions = [q for q in load_jsonl(QUESTIONS) if q["lang"] in question_langs]
    targets = {q["target"] for q in load_jsonl(QUESTIONS)}
    pages = sorted(targets | set(distractors(data, targets, n_distractors)))
    docs = []
    for page in pages:
        body = _NOT_PROSE.sub("", (data / corpus_lang / page).read_text(encoding="utf-8"))
        # Markdown: parsed as ingest parses the file (front-matter title, headings)
        docs.append({"_id": page, "title": "", "text": body, "format": "markdown"})
    return write_beir(out, docs, questions)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the react-docs folder")
    ap.add_argument("--corpus-lang", choices=LANGS, default="en")
    ap.add_argument("--question-langs", default=",".join(LANGS))
    ap.add_argument("--distractors", type=int, default=40)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    langs = [x for x in a.question_langs.split(",") if x]
    unknown = sorted(set(langs) - set(LANGS))
    if unknown:
        raise SystemExit(f"--question-langs: no questions in {', '.join(unknown)}")
    counts = write_dataset(a.data, a.out, a.corpus_lang, langs, a.distractors)
    print(f"{a.out}: {counts['documents']} documents, {counts['queries']} queries")


if __name__ == "__main__":
    main()
