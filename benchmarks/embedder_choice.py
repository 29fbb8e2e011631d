"""The share of non-English chunks per corpus: the data behind the automatic embedder choice.

``RAGLINE_EMBEDDER=auto`` (the default) gives a new index the multilingual model when
the share of non-English chunks in its sampled files reaches
``RAGLINE_EMBED_AUTO_NON_ENGLISH``. This script chunks each corpus under
``../shared/data`` with the default settings (section chunker, chunk languages as
ingest records them) and prints, per corpus, the chunk count, the non-English share
of all chunks and of the evenly spread sample ingest looks at, and the languages
found, so the threshold sits between the English corpora's noise (code listings,
formulas and names detected as another language) and the translated ones.

    PYTHONPATH=src python benchmarks/embedder_choice.py --data ../shared/data \
        --out benchmarks/results/embedder_choice.md
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from ragline.embed.choice import evenly_spaced, non_english_share
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import make_chunker
from ragline.ingest.discover import discover
from ragline.ingest.parse import parse_file
from ragline.ingest.records import build_chunks
from ragline.settings import Settings
from ragline.text.language import chunk_language, document_language


def file_languages(paths: list[Path], base: Path, settings: Settings) -> list[Counter[str]]:
    """Per file, its chunks' languages as ingest records them."""
    chunker = make_chunker(settings, TokenCounter())
    out = []
    for path in paths:
        doc = parse_file(path, path.read_bytes(), max_bytes=settings.max_file_bytes)
        drafts = chunker.chunk(doc)
        chunks = build_chunks(
            doc,
            drafts,
            tenant="t",
            source=path.as_posix(),
            rel_path=path.relative_to(base).as_posix(),
            chapter="",
            base_url="",
            created_at="",
        )
        out.append(Counter(str(c.metadata.get("language", "en")) for c in chunks))
    return out


def scifact_languages(corpus: Path) -> list[Counter[str]]:
    """SciFact abstracts are one chunk each (BEIR text form: one paragraph)."""
    out = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = f"{row['title']}\n{row['text']}"
            out.append(Counter([chunk_language(text, document_language(text))]))
    return out


def summary(name: str, per_file: list[Counter[str]], sample_files: int) -> str:
    total: Counter[str] = sum(per_file, Counter())
    sample: Counter[str] = sum(
        (per_file[i] for i in evenly_spaced(len(per_file), sample_files)), Counter()
    )
    top = ", ".join(f"{k} {v}" for k, v in total.most_common(6))
    return (
        f"| {name} | {len(per_file)} | {sum(total.values())} | "
        f"{non_english_share(total):.3f} | {non_english_share(sample):.3f} | {top} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    settings = Settings()
    rows = []
    corpora: list[tuple[str, Path]] = [("d2l-en", args.data / "d2l-en")]
    react = args.data / "react-docs"
    corpora += [(f"react-docs/{p.name}", p) for p in sorted(react.iterdir()) if p.is_dir()]
    corpora.append(("react-docs (all five)", react))
    for name, folder in corpora:
        paths = discover(folder, settings.extensions).files
        per_file = file_languages(paths, folder, settings)
        rows.append(summary(name, per_file, settings.embed_auto_sample_files))
        print(rows[-1], file=sys.stderr, flush=True)
    rows.append(
        summary(
            "SciFact corpus",
            scifact_languages(args.data / "scifact" / "corpus.jsonl"),
            settings.embed_auto_sample_files,
        )
    )
    print(rows[-1], file=sys.stderr, flush=True)
    head = (
        "| corpus | files | chunks | non-English share (all chunks) | "
        f"(sample of {settings.embed_auto_sample_files} files) | languages (chunks) |\n"
        "|---|---|---|---|---|---|"
    )
    text = (
        "# Non-English share of chunks per corpus (the automatic embedder's threshold)\n\n"
        f"Produced by `PYTHONPATH=src python benchmarks/embedder_choice.py --data {args.data}`"
        " (default settings; the sample: the files ingest looks at).\n\n"
        + head
        + "\n"
        + "\n".join(rows)
        + "\n"
    )
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
