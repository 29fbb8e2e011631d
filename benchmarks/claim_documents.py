"""Choose which documents a claim's extractive answer cites: the passage it is
answered from, and whether a further sentence may come from a second document.

On SciFact train claims (first 120, ``ragline eval --answers --limit 120``) most
citations of a document without evidence were the *lead*: the learned scorer's
best sentence sat in a lower-ranked abstract than a passing sentence of the
evidence abstract (the scorer sees one sentence; the retriever ranked the whole
abstract), and a sentence of a second, lower-ranked abstract was added after it.
Two rules are searched here, on the odd-id train claims:

1. *the passage* (``RAGLINE_EXTRACTIVE_CLAIM_RANK_WEIGHT``, ``a``): the block of
   the passing sentence with the best ``log-odds − a · (block rank − 1)``
   (:func:`ragline.answer.generators.extractive.claim_passage_key`); 0 is the
   scorer alone;
2. *a second document* (``RAGLINE_EXTRACTIVE_CLAIM_OTHER_DOCUMENT_RANKS``, ``k``):
   a further sentence of another document than the lead's is cited only from a
   block at most ``k`` places after the lead's; ``off`` cites any block.

Choice: the best document precision on the odd ids whose document recall stays
>= 0.70 and sentence precision >= 0.50; ties go to the smallest change (the
smallest ``a``, then the largest ``k``). The other sets are reported, not used:
the 40 held-out even ids, the remaining even ids, and the train 120 (mixing both).
The claims' other choices (lead sentence within the passage, the 0.1 bar for
further sentences) stay as ``benchmarks/claim_citations.py`` chose them.

Method: every claim is asked once through the real pipeline (the learned
scorer's verdict and the context kept); each rule pair then re-runs the
extractive generator's sentence choice on that verdict (``compose``: no
retrieval or scoring changes between pairs), and each chosen sentence is scored
as ``ragline eval --answers`` scores a citation (its document; the gold sentences
its span covers). A check line compares this with the real answers' citations at
the configured rule pair.

Run: RAGLINE_SHARED_DATA=/work/shared/data python benchmarks/claim_documents.py
Writes nothing: the tables go into benchmarks/results/evidence_scorer.md.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

from claim_citations import claim_sets
from ragline.answer.generators.base import GenerationRequest
from ragline.answer.generators.extractive import ExtractiveGenerator
from ragline.eval.answers import (
    AnsweredClaim,
    CitedSource,
    covered,
    resolve_citations,
    score_citations,
)

Rule = tuple[float, int | None]  # passage rank weight, other-document ranks (None: off)


def label(k: int | None) -> str:
    return "off" if k is None else str(k)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", type=float, nargs="*", default=[0, 0.25, 0.5, 1, 2, 4])
    ap.add_argument("--ranks", type=int, nargs="*", default=[0, 1, 2, 4])
    args = ap.parse_args()
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    index, sets, claims, spans = claim_sets()
    rag = index.rag
    gen = rag.answerer.generator
    assert isinstance(gen, ExtractiveGenerator)
    configured: Rule = (gen.claim_rank_weight, gen.claim_other_document_ranks)

    requests: dict[str, GenerationRequest] = {}
    compose = gen.compose

    def keep(request: GenerationRequest) -> Any:
        requests[request.question] = request
        return compose(request)

    gen.compose = keep  # type: ignore[method-assign]
    asked: dict[str, AnsweredClaim] = {}
    for c in claims:
        answer = rag.ask(c.text)
        cited = () if answer.fallback else resolve_citations(answer, index.doc_of, spans)
        asked[c.id] = AnsweredClaim(c, answer.fallback, cited)
    gen.compose = compose  # type: ignore[method-assign]
    print(f"{len(claims)} claims asked in {time.perf_counter() - t0:.0f} s", flush=True)

    def cites(request: GenerationRequest) -> tuple[CitedSource, ...]:
        out = []
        for cand in gen.compose(request):
            block = request.context.block(cand.block)
            assert block is not None
            chunk, s, e = block.locate(cand.start, cand.start + len(cand.text))
            doc = index.doc_of.get(chunk.doc_id, "")
            at = chunk.start_char
            out.append(CitedSource(doc, frozenset(covered(spans.get(doc, ()), at + s, at + e))))
        return tuple(out)

    def run(rule: Rule) -> dict[str, dict[str, Any]]:
        gen.claim_rank_weight, gen.claim_other_document_ranks = rule
        answered = {
            c.id: asked[c.id]
            if asked[c.id].fallback
            else AnsweredClaim(c, False, cites(requests[c.text]))
            for c in claims
        }
        return {
            name: score_citations(answered[c.id] for c in group).to_dict()
            for name, group in sets.items()
        }

    rules: list[Rule] = [(a, k) for a in args.weights for k in [*args.ranks, None]]
    results = {rule: run(rule) for rule in rules}
    check = {
        name: score_citations(asked[c.id] for c in group).to_dict() for name, group in sets.items()
    }
    gen.claim_rank_weight, gen.claim_other_document_ranks = configured
    index.close()

    def fits(d: dict[str, Any]) -> bool:
        return bool(d["doc_recall"] >= 0.70 and d["sentence_precision"] >= 0.50)

    def choose(options: Sequence[Rule]) -> Rule:
        tune = {r: results[r]["tune (odd ids)"] for r in options}
        ok = [r for r in options if fits(tune[r])] or list(options)
        return max(
            ok,
            key=lambda r: (round(tune[r]["doc_precision"], 6), -r[0], r[1] is None, r[1] or 0),
        )

    chosen = choose(rules)
    print(
        f"\n{len(claims)} claims; load average {load0:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - t0:.0f} s\n"
    )
    for name, group in sets.items():
        print(f"### {name} ({len(group)} claims)\n")
        print("| rank weight | other-document ranks | citations | doc P | doc R | sentence P |")
        print("|---:|---:|---:|---:|---:|---:|")
        for (a, k), per in results.items():
            d = per[name]
            print(
                f"| {a:g} | {label(k)} | {d['citations']} | {d['doc_precision']:.3f} | "
                f"{d['doc_recall']:.3f} | {d['sentence_precision']:.3f} |"
            )
        d = check[name]
        print(
            f"\ncheck, the real answers at the configured rule ({configured[0]:g}, "
            f"{label(configured[1])}): {d['citations']} citations, doc P "
            f"{d['doc_precision']:.3f}, doc R {d['doc_recall']:.3f}, sentence P "
            f"{d['sentence_precision']:.3f}\n"
        )
    print(
        f"chosen on the tune claims: rank weight {chosen[0]:g}, other-document ranks "
        f"{label(chosen[1])}"
    )


if __name__ == "__main__":
    main()
