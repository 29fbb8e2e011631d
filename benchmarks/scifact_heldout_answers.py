"""SciFact answer citations on the claims the evidence scorer was *not* fitted on.

benchmarks/fit_evidence_scorer.py fits on the odd ids among the first 200 train
claims with evidence; this asks the even ids among them (``--limit`` of them)
with both evidence scorers in turn and reports what ``ragline eval --answers``
reports (document and sentence citation precision and recall, fallback of
answerable claims, distractor abstention). Out-of-scope questions are skipped.

Run: python benchmarks/scifact_heldout_answers.py [--limit 40]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from rich.progress import Progress

from benchlib import SHARED
from ragline.eval.answers import load_claims
from ragline.eval.answers_run import run_answers
from ragline.eval.cli import _claims_corpus, _open_index
from ragline.eval.index import indexed_text
from ragline.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=40)
    args = ap.parse_args()
    claims_dir = SHARED / "scifact" / "claims"
    data = load_claims(claims_dir, "train")
    corpus, digest, name = _claims_corpus(claims_dir, SHARED / "scifact", data)
    held = [c for c in data.claims if c.evidence][:200]
    held = [c for c in held if int(c.id) % 2 == 0][: args.limit]
    bodies = {d.id: indexed_text(d) for d in corpus}
    print(f"{len(held)} held-out claims; load average {os.getloadavg()[0]:.1f}")
    for scorer in ("weighted", "learned"):
        t0 = time.perf_counter()
        with Progress(disable=True) as bar:
            index = _open_index(bar, corpus, digest, name, Settings(evidence_scorer=scorer), False)
        try:
            (res,) = run_answers(held, data, bodies, [], index)
        finally:
            index.close()
        d = res.to_dict()
        keep = (
            "citations",
            "doc_precision",
            "doc_recall",
            "sentence_precision",
            "sentence_recall",
            "fallback_rate_in_scope",
            "abstention_rate_distractor",
        )
        row = {k: d.get(k) for k in keep}
        print(scorer, json.dumps(row), f"{time.perf_counter() - t0:.0f} s")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
