"""Languages and follow-ups on react.dev's translated docs: hit@3 per mode and model.

Indexes a subset of ``../shared/data/react-docs`` per language (the pages the
questions target plus ``--distractors`` other pages found in every language,
prose only; the same paths in every language) into the store chosen by
``--store`` (``lance``: the default LanceDB store, whose in-memory mirror scores
BM25 with ragline's per-language analyser; ``qdrant``: Qdrant's local mode, the
same analyser), once with the default model and once with multilingual-e5-small
(``--models`` picks; ``auto``, the shipped default, lets each index choose its model
from its chunks' languages: e5 for es/fr/ja/zh pages, MiniLM for English), and measures:

* same-language hit@3 (a top-3 hit from the target page) per mode;
* cross-language hit@3: es/fr/ja/zh questions over the English index;
* extractive answers to the es/fr/ja/zh questions: cite the target page, no English
  (the misses listed: the page cited, or the fallback's reason);
* follow-ups: the follow-up alone vs made self-contained (carry-over);
* the e5 top cosine of in-scope vs out-of-scope questions (confidence floor).

    python benchmarks/languages.py --work /tmp/langbench --out benchmarks/results/languages.md
    python benchmarks/languages.py --store lance --distractors 40 --models onnx --work /tmp/lb
    python benchmarks/languages.py --store lance --distractors 40 --models auto --langs es,fr \
        --no-cross --answers 20 --work /tmp/lb29

Indexes are kept under ``--work`` and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import emit, load_jsonl
from machine import command_line, load_average, machine_lines
from ragline.answer.generators.base import Message
from ragline.answer.i18n import FALLBACK
from ragline.embed.factory import make_embedder
from ragline.engine import Ragline
from ragline.retrieve.conversation import carry_over
from ragline.settings import Settings

DATA = Path(__file__).resolve().parent / "data"
REACT = Path("../shared/data/react-docs")  # from the repository root; see --data
LANGS = ["en", "es", "fr", "ja", "zh-hans"]
MODES = ["bm25", "vector", "hybrid"]
DOCS = [REACT]
MODELS = {
    "default (MiniLM)": "onnx",
    "multilingual-e5-small": "e5",
    "auto (shipped default)": "auto",
}
#: Extra pages besides the targets (``--distractors``; none by default: the 20 target
#: pages, all React topics, are each other's distractors).
DISTRACTORS: list[str] = []
#: The store of every index (``--store``).
STORE = ["qdrant"]
#: Code and interactive examples removed before indexing (prose only): they are
#: two thirds of react.dev's bytes and no question is about them.
_NOT_PROSE = re.compile(
    r"```.*?```|<Sandpack>.*?</Sandpack>|<(Solution|Challenges|DeepDive|Recipes)>.*?</\1>", re.S
)


class CachedQueries:
    """An embedder whose query vectors are kept: each question is embedded once for
    the vector and hybrid modes (e5 embeds a question in seconds on the loaded machine)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.queries: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def fingerprint(self) -> Any:
        return self.inner.fingerprint

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_documents(self, texts: Any) -> Any:
        return self.inner.embed_documents(texts)

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))

    def embed_query(self, text: str) -> Any:
        if text not in self.queries:
            self.queries[text] = self.inner.embed_query(text)
        return self.queries[text]


EMBEDDERS: dict[str, CachedQueries] = {}
#: Phrases of ragline's own English answer text (fallback, related passages, reasons,
#: LLM-busy notice): none may appear in a Japanese or Chinese answer.
ENGLISH_PHRASES = (
    FALLBACK["en"].lower()[:30],
    "the documents cover",
    "related passages",
    "top relevance",
    "the language model is busy",
    "answer-worthy",
    "no passage",
)


def pages(questions: list[dict[str, Any]]) -> list[str]:
    return sorted({q["target"] for q in questions} | set(DISTRACTORS))


def engine(
    work: Path, lang: str, model: str, subset: list[str], name: str = "", **extra: Any
) -> Ragline:
    """The index of one language with one model (built on first use)."""
    base = work / f"{lang}-{model}{name}"
    store_url = f"qdrant+local://{base / 'qdrant'}" if STORE[0] == "qdrant" else ""
    settings = Settings(
        index_dir=base / "index",
        store_url=store_url,
        embedder=model,  # type: ignore[arg-type]
        **extra,
    )
    if model == "auto":  # no embedder handed in: the index chooses (and records) its model
        rag = Ragline(settings)
    else:
        if model not in EMBEDDERS:  # one model per process, its query vectors cached
            EMBEDDERS[model] = CachedQueries(make_embedder(settings))
        rag = Ragline(settings, embedder=EMBEDDERS[model])
    if not (base / "done").exists():
        docs = base / "docs"
        for page in subset:
            dest = docs / page
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(_NOT_PROSE.sub("", (DOCS[0] / lang / page).read_text()))
        t0 = time.perf_counter()
        report = rag.ingest(docs)
        seconds = time.perf_counter() - t0
        (base / "done").write_text(
            json.dumps({"chunks": report.chunks, "s": seconds, "model": report.model})
        )
    return rag


def distractors(data: Path, targets: set[str], n: int) -> list[str]:
    """``n`` pages found in every language besides the targets, spread evenly over the
    sorted paths (learn/ and reference/ alike), the same on every run."""
    common = set.intersection(
        *({str(p.relative_to(data / lang)) for p in (data / lang).rglob("*.md")} for lang in LANGS)
    )
    rest = sorted(common - targets)
    if n <= 0 or not rest:
        return []
    step = max(1, len(rest) // n)
    return rest[::step][:n]


def english_text(text: str) -> bool:
    """True when ``text`` holds a phrase of ragline's own English answer text."""
    low = " ".join(text.lower().split())
    return any(p in low for p in ENGLISH_PHRASES)


def is_hit(hits: list[Any], target: str, k: int = 3) -> bool:
    return any(h.chunk.source.endswith("/" + target) for h in hits[:k])


def hit_rates(rag: Ragline, questions: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for mode in MODES:
        got = [
            is_hit(rag.search(q["question"], mode=mode, top_k=3).hits, q["target"])
            for q in questions
        ]
        out[mode] = sum(got) / len(got)
    return out


def row(lang: str, label: str, r: dict[str, float] | None) -> str:
    if r is None:
        return f"| {lang} | {label} | not run | (index not built in time) | |"
    return f"| {lang} | {label} | {r['bm25']:.2f} | {r['vector']:.2f} | {r['hybrid']:.2f} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/langbench"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-build", action="store_true", help="measure only the indexes built")
    ap.add_argument(
        "--answers", type=int, default=6, help="questions answered per language (e5 is slow)"
    )
    ap.add_argument("--data", type=Path, default=REACT, help="the react-docs folder")
    ap.add_argument(
        "--e5-confidence-min", type=float, default=0.0, help="0: above every out-of-scope score"
    )
    ap.add_argument("--no-answers", action="store_true", help="skip the answers")
    ap.add_argument(
        "--no-cross", action="store_true", help="skip the cross-language rows (no English index)"
    )
    ap.add_argument(
        "--langs",
        default=",".join(LANGS),
        help="languages whose own index is built (the cross-language rows need en only)",
    )
    ap.add_argument("--store", choices=["lance", "qdrant"], default="qdrant")
    ap.add_argument(
        "--distractors", type=int, default=0, help="other pages indexed besides the targets"
    )
    ap.add_argument(
        "--models",
        default="onnx,e5",
        help="embedders measured, comma-separated (onnx, e5, auto: the shipped default)",
    )
    args = ap.parse_args()
    DOCS[0] = args.data
    STORE[0] = args.store
    wanted = set(args.models.split(","))
    built = set(args.langs.split(","))
    for label in [k for k, v in MODELS.items() if v not in wanted]:
        del MODELS[label]
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    loads = [load_average()[0]]
    questions = load_jsonl(DATA / "languages_questions.jsonl")
    followups = load_jsonl(DATA / "followups.jsonl")
    DISTRACTORS[:] = distractors(args.data, {q["target"] for q in questions}, args.distractors)
    subset = pages(questions)
    by_lang: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by_lang[q["lang"]].append(q)

    cache: dict[str, Any] = {}

    def measured(key: str, fn: Any) -> Any:
        """A measurement, run once and kept in ``--work`` (runs may be resumed, and
        several processes share the work: one a key, the others skip it meanwhile)."""
        path = args.work / "results" / (key.replace("/", "_") + ".json")
        lock = path.with_suffix(".lock")
        if key in cache:
            return cache[key]
        if path.exists():
            cache[key] = json.loads(path.read_text())
            return cache[key]
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.touch(exist_ok=False)
        except FileExistsError:
            return None  # another process is measuring it
        cache[key] = fn()
        path.write_text(json.dumps(cache[key]))
        lock.unlink()
        loads.append(load_average()[0])
        print(key, cache[key], flush=True)
        return cache[key]

    def ready(lang: str, model: str, name: str = "") -> bool:
        return not args.no_build or (args.work / f"{lang}-{model}{name}" / "done").exists()

    def rates(lang: str, model: str, qlang: str) -> dict[str, float]:
        rag = engine(args.work, lang, model, subset)
        try:
            return hit_rates(rag, by_lang[qlang])
        finally:
            rag.close()

    lines: list[str] = []
    same: dict[tuple[str, str], dict[str, float] | None] = {}
    sizes: dict[tuple[str, str], dict[str, float]] = {}
    for label, model in MODELS.items():
        for lang in LANGS:
            if lang not in built or not ready(lang, model):
                same[(lang, label)] = None
                continue
            same[(lang, label)] = measured(
                f"same/{lang}/{model}", lambda lang=lang, model=model: rates(lang, model, lang)
            )
            done = args.work / f"{lang}-{model}" / "done"
            if done.exists():  # not while another process builds it
                sizes[(lang, model)] = json.loads(done.read_text())

    cross: dict[tuple[str, str], dict[str, float] | None] = {}
    for label, model in MODELS.items():
        for lang in LANGS[1:]:
            cross[(lang, label)] = (
                measured(
                    f"cross/{lang}/{model}", lambda lang=lang, model=model: rates("en", model, lang)
                )
                if ready("en", model) and not args.no_cross
                else None
            )

    # The e5 confidence scale: top cosine of in-scope vs out-of-scope questions.
    def scale() -> tuple[list[float], list[float]]:
        rag = engine(args.work, "en", "e5", subset)
        ins = [
            rag.search(q["question"], mode="vector", top_k=1).hits[0].vector_score or 0.0
            for q in by_lang["en"]
        ]
        oos_q = [
            json.loads(x)["question"]
            for x in (DATA / "out_of_scope.jsonl").read_text().splitlines()
            if x.strip()
        ]
        oos = [rag.search(q, mode="vector", top_k=1).hits[0].vector_score or 0.0 for q in oos_q]
        rag.close()
        return ins, oos

    ins: list[float] = []
    oos: list[float] = []
    if "e5" in MODELS.values() and ready("en", "e5"):
        ins, oos = measured("scale/e5", scale) or ([], [])
    # The floor sits just above every out-of-scope question, as MiniLM's 0.40 does.
    floor = args.e5_confidence_min
    if floor <= 0:
        floor = round(max(oos) + 0.005, 3) if oos else 0.0

    # Answers (extractive, hybrid) to the es/fr/ja/zh questions with each model: e5 at
    # the floor above (its scale), the default model and auto at their own defaults.
    def answer_run(lang: str, model: str) -> list[Any]:
        extra: dict[str, float] = {}
        if model == "e5":  # the level "high" band on the same scale
            extra = {"confidence_min": floor, "confidence_high": min(1.0, floor + 0.04)}
        rag = engine(args.work, lang, model, subset, **extra)
        right = fallback = eng = 0
        misses = []  # the page(s) cited, or the fallback's reason
        for q in by_lang[lang][: args.answers]:
            a = rag.ask(q["question"])
            cited = {c.source for c in a.citations}
            ok = any(s.endswith("/" + q["target"]) for s in cited) and not a.fallback
            right += ok
            fallback += a.fallback
            eng += english_text(a.text)
            if not ok:
                got = sorted({s.split("/docs/", 1)[-1] for s in cited})
                misses.append(
                    {
                        "id": q["id"],
                        "fallback": a.fallback,
                        "reason": a.confidence.reason,
                        "cited": got,
                    }
                )
        rag.close()
        return [right, fallback, eng, len(by_lang[lang][: args.answers]), misses]

    answers: dict[tuple[str, str], list[Any] | None] = {}
    for label, model in MODELS.items():
        for lang in LANGS[1:]:
            ok = lang in built and ready(lang, model) and not args.no_answers
            ok = ok and (model != "e5" or floor > 0)
            key = f"answers/{lang}/{model}/{floor if model == 'e5' else 'default'}/{args.answers}"
            answers[(lang, label)] = (
                measured(key, lambda lang=lang, model=model: answer_run(lang, model))
                if ok
                else None
            )

    # Follow-ups over an English index that also holds their target pages (default model:
    # the carry-over is a keyword-side change, and e5 indexing is slow on this machine).
    fu_pages = sorted(set(subset) | {f["target"] for f in followups})

    def follow_run(model: str, variant: str) -> float:
        rag = engine(args.work, "en", model, fu_pages, name="-followups")
        hits = []
        for f in followups:
            history = [Message(m["role"], m["content"]) for m in f["history"]]
            query = f["question"]
            if variant == "carry-over":
                query = carry_over(query, history).query
            hits.append(is_hit(rag.search(query, mode="hybrid", top_k=3).hits, f["target"]))
        rag.close()
        return sum(hits) / len(hits)

    follow: dict[str, dict[str, float]] = {}
    for label, model in MODELS.items():
        if model == "onnx" and ready("en", model, "-followups"):
            follow[label] = {
                v: measured(f"follow/{model}/{v}", lambda model=model, v=v: follow_run(model, v))
                for v in ("alone", "carry-over")
            }

    lines += ["# Languages and follow-ups (react.dev docs, issue 11)", ""]
    lines += machine_lines(loads)
    lines += [
        f"- command: `{command_line()}`",
        f"- data: `../shared/data/react-docs/{{en,es,fr,ja,zh-hans}}`, {len(subset)} pages per "
        f"language (the {len({q['target'] for q in questions})} pages the questions target"
        + (
            f" and {len(DISTRACTORS)} other pages found in every language, spread evenly over "
            "the sorted paths"
            if DISTRACTORS
            else " and no other pages: they are each other's distractors"
        )
        + "; same paths in every language), prose only: code blocks and interactive "
        "examples removed.",
        f"- questions: `benchmarks/data/languages_questions.jsonl` ({len(by_lang['en'])} per "
        "language, the same questions translated), `benchmarks/data/followups.jsonl` "
        f"({len(followups)} pairs, over an English index of {len(fu_pages)} pages: the subset "
        "plus the follow-ups' target pages)",
        "- store: "
        + (
            "Qdrant local mode (its BM25 is ragline's per-language analyser)"
            if args.store == "qdrant"
            else "LanceDB, the default store (BM25 from its in-memory mirror: ragline's "
            "per-language analyser)"
        )
        + "; hit@3 = a top-3 chunk comes from the target page",
        "- index sizes: "
        + ", ".join(
            f"{lang}/{m} {int(s['chunks'])} chunks ({s['s']:.0f} s"
            + (f", model {s['model']}" if m == "auto" and "model" in s else "")
            + ")"
            for (lang, m), s in sizes.items()
        ),
        "",
        "## Same-language hit@3",
        "",
        "| language | model | bm25 | vector | hybrid |",
        "|---|---|---:|---:|---:|",
    ]
    for (lang, label), r in same.items():
        lines.append(row(lang, label, r))
    lines += [
        "",
        "## Cross-language hit@3 (questions over the English index)",
        "",
        "| questions | model | bm25 | vector | hybrid |",
        "|---|---|---:|---:|---:|",
    ]
    for (lang, label), r in cross.items():
        lines.append(row(lang, label, r))
    lines += [
        "",
        "## Answers in Spanish, French, Japanese and Chinese (extractive, hybrid"
        + (f"; multilingual-e5-small at confidence_min {floor}" if "e5" in MODELS.values() else "")
        + ("; the default model at its defaults" if "onnx" in MODELS.values() else "")
        + ("; auto at the shipped defaults" if "auto" in MODELS.values() else "")
        + ")",
        "",
        "English text = a phrase of ragline's own English answer text (fallback, related "
        "passages, confidence reasons, LLM-busy notice) in the answer.",
        "",
        "| language | model | cite the target page | fallbacks | English text in the answer |",
        "|---|---|---:|---:|---:|",
    ]
    missed: list[str] = []
    for (lang, label), res in answers.items():
        if res is None:
            lines.append(f"| {lang} | {label} | not run | | |")
            continue
        right, fb, eng, n = res[:4]
        lines.append(f"| {lang} | {label} | {right}/{n} ({right / n:.0%}) | {fb} | {eng} |")
        for m in res[4] if len(res) > 4 else []:
            why = (
                f"fallback: {m['reason']}" if m["fallback"] else f"cited {m['cited'] or 'nothing'}"
            )
            missed.append(f"- {label}, {m['id']}: {why}")
    if missed:
        lines += ["", "Misses (not citing the target page):", "", *missed]
    lines += [
        "",
        "## Follow-ups (hybrid hit@3 over the English index)",
        "",
        "| model | follow-up alone (baseline) | made self-contained (carry-over) |",
        "|---|---:|---:|",
    ]
    for label, r in follow.items():
        if None in r.values():
            lines.append(f"| {label} | not run | |")
            continue
        lines.append(f"| {label} | {r['alone']:.2f} | {r['carry-over']:.2f} |")
    lines += ["", "## multilingual-e5-small's confidence scale", ""]
    if ins and oos:
        lines.append(
            f"Top cosine of the {len(ins)} English questions: min {min(ins):.3f}, median "
            f"{sorted(ins)[len(ins) // 2]:.3f}; of the {len(oos)} out-of-scope questions "
            f"(`benchmarks/data/out_of_scope.jsonl`): median {sorted(oos)[len(oos) // 2]:.3f}, "
            f"max {max(oos):.3f}. The answers above use `confidence_min` {floor}: there "
            f"{sum(x < floor for x in ins)}/{len(ins)} in-scope questions would fall back and "
            f"{sum(x >= floor for x in oos)}/{len(oos)} out-of-scope ones would be answered."
        )
    else:
        lines.append("Not run (the English e5 index was not built in time).")
    lines.append("")
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
