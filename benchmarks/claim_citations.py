"""Choose how a claim's citations are picked: the lead sentence within its passage,
and the bar further sentences must pass.

A claim (a statement asked as it is) judged by the learned evidence scorer is
answered from the passage of its best-scoring sentence; the extractive generator
cites a lead sentence and up to two more passing ones. Two choices are made here
on SciFact train claims, scoring the citations as ``ragline eval --answers``
does (document and sentence precision and recall):

1. *the lead within its passage*: the passing sentence of the best passage with
   the best ``log-odds + words · (length / 30 words) + position · (0 first … 1
   last)`` (:func:`ragline.answer.generators.extractive.claim_lead_key`); a grid
   over the two weights, (0, 0) being the scorer's own best sentence;
2. *the bar for further sentences* (``RAGLINE_EXTRACTIVE_CLAIM_EXTRA_MIN``): the
   learned probability a sentence after the lead needs (0: any sentence that
   lets a claim be answered at all), with the chosen lead rule.

Neither choice changes which claims fall back or which distractors are refused
(the passage and its score are the scorer's). Claims, the first 200 train
claims with evidence as the scorer's fit used them:

* *tune*: odd ids (the learned scorer's fit split): both choices are made here,
  each the best sentence precision whose document recall stays >= 0.70; ties go
  to the smallest change (the smallest weights, then the lowest bar);
* *held-out 40*: the first 40 even ids (benchmarks/scifact_heldout_answers.py);
* *other even ids*: the remaining even ids, used for neither choice;
* *train 120*: the claims with evidence among the first 120 train claims (what
  ``ragline eval --answers --limit 120`` scores; it mixes the splits).

Run: RAGLINE_SHARED_DATA=/work/shared/data python benchmarks/claim_citations.py
(the passage and second-document rules of benchmarks/claim_documents.py came
later; ``RAGLINE_EXTRACTIVE_CLAIM_RANK_WEIGHT=0
RAGLINE_EXTRACTIVE_CLAIM_OTHER_DOCUMENT_RANKS=10000`` turns them off, as when
these choices were made).
Writes nothing: the tables go into benchmarks/results/evidence_scorer.md.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from calibrate_evidence import SHARED, scifact_train_index
from ragline.answer.generators import extractive
from ragline.answer.generators.extractive import ExtractiveGenerator
from ragline.eval.answers import AnsweredClaim, resolve_citations, score_citations, sentence_spans
from ragline.eval.cli import _claims_corpus
from ragline.eval.index import indexed_text

Config = tuple[float, float, float]  # lead words weight, lead position weight, bar


def claim_sets() -> tuple[Any, dict[str, list[Any]], list[Any], dict[str, Any]]:
    """The SciFact train eval index, the claim sets (tune = odd ids of the first 200
    with evidence; held-out 40 and other even ids; train 120), every claim once, and
    each evidence document's sentence spans in its indexed text."""
    data, index = scifact_train_index()
    first = [c for c in data.claims if c.evidence][:200]
    even = [c for c in first if int(c.id) % 2 == 0]
    sets = {
        "tune (odd ids)": [c for c in first if int(c.id) % 2],
        "held-out 40": even[:40],
        "other even ids": even[40:],
        "train 120": [c for c in data.claims[:120] if c.evidence],
    }
    claims = list({c.id: c for group in sets.values() for c in group}.values())
    corpus, _, _ = _claims_corpus(SHARED / "scifact" / "claims", SHARED / "scifact", data)
    bodies = {d.id: indexed_text(d) for d in corpus}
    spans = {
        doc: sentence_spans(bodies[doc], sents)
        for doc, sents in data.sentences.items()
        if doc in bodies
    }
    return index, sets, claims, spans


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=float, nargs="*", default=[0, 0.5, 1, 1.5, 2, 3])
    ap.add_argument("--position", type=float, nargs="*", default=[0, 0.5, 1])
    ap.add_argument("--bars", type=float, nargs="*", default=[0.1, 0.2, 0.3])
    args = ap.parse_args()
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    index, sets, claims, spans = claim_sets()
    rag = index.rag
    gen = rag.answerer.generator
    assert isinstance(gen, ExtractiveGenerator)
    results: dict[Config, dict[str, dict[str, Any]]] = {}

    def run(config: Config) -> dict[str, dict[str, Any]]:
        extractive.CLAIM_LEAD_WORDS, extractive.CLAIM_LEAD_POSITION, gen.claim_extra_min = config
        answered = {}
        for c in claims:
            answer = rag.ask(c.text)
            cited = () if answer.fallback else resolve_citations(answer, index.doc_of, spans)
            answered[c.id] = AnsweredClaim(c, answer.fallback, cited)
        results[config] = {
            name: score_citations(answered[c.id] for c in group).to_dict()
            for name, group in sets.items()
        }
        print(f"{config}: done at {time.perf_counter() - t0:.0f} s", flush=True)
        return results[config]

    def choose(configs: list[Config]) -> Config:
        tune = {k: results[k]["tune (odd ids)"] for k in configs}
        ok = [k for k, d in tune.items() if d["doc_recall"] >= 0.70] or configs
        return max(ok, key=lambda k: (round(tune[k]["sentence_precision"], 6), -sum(k)))

    leads = [(w, p, 0.0) for w in args.words for p in args.position]
    for config in leads:
        run(config)
    lead = choose(leads)
    bars = [lead] + [(lead[0], lead[1], b) for b in args.bars]
    for config in bars[1:]:
        run(config)
    chosen = choose(bars)
    index.close()
    print(
        f"\n{len(claims)} claims; load average {load0:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - t0:.0f} s\n"
    )
    for name, group in sets.items():
        print(f"### {name} ({len(group)} claims)\n")
        print("| words | position | bar | citations | doc P | doc R | sentence P | sentence R |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (w, p, bar), per in results.items():
            d = per[name]
            print(
                f"| {w:g} | {p:g} | {bar:g} | {d['citations']} | {d['doc_precision']:.3f} | "
                f"{d['doc_recall']:.3f} | {d['sentence_precision']:.3f} | "
                f"{d['sentence_recall']:.3f} |"
            )
        print()
    print(f"lead rule chosen on the tune claims: words {lead[0]:g}, position {lead[1]:g}")
    print(f"bar chosen on the tune claims with it: {chosen[2]:g}")


if __name__ == "__main__":
    main()
