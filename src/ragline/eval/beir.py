"""Load a BEIR-layout dataset folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

Bad input fails with :class:`DatasetError` naming the file and line, because a
silently skipped line would change the scores without anyone noticing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragline.errors import InputError


class DatasetError(InputError, ValueError):
    """A dataset file is missing or malformed (the message names file and line)."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class BeirDocument:
    """One corpus entry: ``title`` is indexed as the title field, ``text`` as the body.
    ``markdown``: the line says ``"format": "markdown"``, so ``text`` is parsed as a
    Markdown file is at ingest (front matter, headings, markup hygiene), not as
    plain paragraphs: documentation sets are evaluated the way users index them."""

    id: str
    title: str
    text: str
    markdown: bool = False


@dataclass(slots=True)
class BeirDataset:
    """A corpus, the queries of one split that have judgements, and those judgements.

    ``qrels[query_id][doc_id]`` is the graded relevance (> 0 is relevant).
    """

    root: Path
    split: str
    corpus: dict[str, BeirDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus_hash: str = ""
    skipped_queries: list[str] = field(default_factory=list)  # judged but not in queries.jsonl
    #: query id → language tag (``lang`` in queries.jsonl), for the tagged queries
    languages: dict[str, str] = field(default_factory=dict)


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a clear error for anything else."""
    if not path.is_file():
        raise DatasetError(path, None, "file not found")
    with path.open("rb") as f:
        for no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise DatasetError(path, no, f"not valid JSON ({e})") from None
            if not isinstance(obj, dict):
                raise DatasetError(path, no, f"expected a JSON object, got {type(obj).__name__}")
            yield no, obj


def _string_field(obj: dict[str, Any], key: str, path: Path, line: int, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise DatasetError(path, line, f"missing field {key!r}")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DatasetError(path, line, f"field {key!r} must be a string, got {value!r}")
    return str(value)


def load_corpus(path: Path) -> tuple[dict[str, BeirDocument], str]:
    """Documents by id, and a sha256 over their content in file order (the index cache key)."""
    docs: dict[str, BeirDocument] = {}
    digest = hashlib.sha256()
    for no, obj in iter_jsonl(path):
        doc_id = _string_field(obj, "_id", path, no, required=True).strip()
        if not doc_id:
            raise DatasetError(path, no, "field '_id' is empty")
        if doc_id in docs:
            raise DatasetError(path, no, f"duplicate document id {doc_id!r}")
        title = _string_field(obj, "title", path, no, required=False)
        text = _string_field(obj, "text", path, no, required=False)
        if not (title.strip() or text.strip()):
            raise DatasetError(path, no, f"document {doc_id!r} has neither title nor text")
        form = _string_field(obj, "format", path, no, required=False).strip() or "text"
        if form not in ("text", "markdown"):
            raise DatasetError(path, no, f"field 'format' is {form!r}: text or markdown")
        markdown = form == "markdown"
        docs[doc_id] = BeirDocument(doc_id, title, text, markdown)
        key = [doc_id, title, text, form] if markdown else [doc_id, title, text]
        digest.update(json.dumps(key, ensure_ascii=False).encode())
    if not docs:
        raise DatasetError(path, None, "no documents")
    return docs, digest.hexdigest()


def query_language(obj: dict[str, Any], path: Path, line: int) -> str:
    """A query's language tag: ``lang`` on the line or in its ``metadata`` (also
    ``language``); "" when untagged. Tagged queries are scored per language too."""
    meta = obj.get("metadata")
    for holder in (obj, meta if isinstance(meta, dict) else {}):
        for key in ("lang", "language"):
            value = holder.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip():
                raise DatasetError(path, line, f"field '{key}' must be a non-empty string")
            return value.strip()
    return ""


def load_query_languages(path: Path) -> dict[str, str]:
    """Query id → language tag, for the tagged queries of ``queries.jsonl``."""
    tags: dict[str, str] = {}
    for no, obj in iter_jsonl(path):
        lang = query_language(obj, path, no)
        if lang:
            tags[str(obj.get("_id", "")).strip()] = lang
    return tags


def load_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for no, obj in iter_jsonl(path):
        qid = _string_field(obj, "_id", path, no, required=True).strip()
        text = _string_field(obj, "text", path, no, required=True)
        if not qid:
            raise DatasetError(path, no, "field '_id' is empty")
        if not text.strip():
            raise DatasetError(path, no, f"query {qid!r} has an empty 'text'")
        if qid in queries:
            raise DatasetError(path, no, f"duplicate query id {qid!r}")
        queries[qid] = text
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id<TAB>corpus-id<TAB>score`` lines; a first line naming the columns is a header."""
    if not path.is_file():
        raise DatasetError(path, None, "file not found")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as f:
        for no, raw in enumerate(f, start=1):
            line = raw.rstrip("\n\r")
            if not line.strip():
                continue
            parts = line.split("\t")
            if no == 1 and parts[0].strip().lower() in {"query-id", "query_id", "qid"}:
                continue
            if len(parts) == 4:  # TREC layout: qid, iteration, docid, relevance
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3:
                raise DatasetError(
                    path,
                    no,
                    f"expected 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(parts)}",
                )
            qid, doc_id, score = (p.strip() for p in parts)
            if not qid or not doc_id:
                raise DatasetError(path, no, "empty query-id or corpus-id")
            try:
                rel = int(score)
            except ValueError:
                raise DatasetError(path, no, f"score must be an integer, got {score!r}") from None
            qrels.setdefault(qid, {})[doc_id] = rel
    if not qrels:
        raise DatasetError(path, None, "no judgements")
    return qrels


def load_beir(root: Path, split: str = "test") -> BeirDataset:
    """The dataset in ``root`` restricted to the queries judged in ``split``.

    Judged documents missing from the corpus are an error (the scores would be
    wrong); judged queries missing from ``queries.jsonl`` are skipped and listed;
    queries with no judgement above 0 are left out (no ranking could score them).
    """
    if not root.is_dir():
        raise DatasetError(root, None, "not a folder")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        found = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        hint = f" (splits found: {', '.join(found)})" if found else ""
        raise DatasetError(qrels_path, None, f"file not found{hint}")
    corpus, corpus_hash = load_corpus(root / "corpus.jsonl")
    queries = load_queries(root / "queries.jsonl")
    qrels = load_qrels(qrels_path)
    for qid, judged in qrels.items():
        for doc_id in judged:
            if doc_id not in corpus:
                raise DatasetError(
                    qrels_path,
                    None,
                    f"query {qid!r} judges document {doc_id!r}, which is not in corpus.jsonl",
                )
    skipped = sorted(q for q in qrels if q not in queries)
    # A query whose judgements are all "not relevant" has nothing to find: it would
    # score 0 on every metric whatever the ranking, so it is not evaluated.
    scored = {q for q, r in qrels.items() if q in queries and any(v > 0 for v in r.values())}
    judged_queries = {q: queries[q] for q in queries if q in scored}
    return BeirDataset(
        root=root,
        split=split,
        corpus=corpus,
        queries=judged_queries,
        qrels={q: r for q, r in qrels.items() if q in scored},
        corpus_hash=corpus_hash,
        skipped_queries=skipped,
        languages={
            q: lang
            for q, lang in load_query_languages(root / "queries.jsonl").items()
            if q in scored
        },
    )
