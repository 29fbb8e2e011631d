"""Build "how do I …?" reader pairs from documentation (react-docs en), never copied into the repo.

SQuAD and QNLI teach the reader factoid questions about Wikipedia prose; a user of a RAG
engine asks its documentation how to do things, and the first reader refused such
questions even over the right section ("How do I enable CORS …?" read 0.01). Headings of
technical documentation are those questions in short form, and the section under a
heading is what answers it:

* a gerund heading ("Updating objects in state") becomes "How do I update objects in
  state?" (the verb's base form is the corpus word the gerund comes from: update, not
  updat); an imperative one ("Step 2: Create the context") "How do I create the context?";
  a heading that is a question stays as it is;
* an API's ``Returns`` / ``Parameters`` / ``Caveats`` sections answer "What does `x`
  return?", "What parameters does `x` take?", "What are the caveats of `x`?";
* the section's own body (without its heading, so the question's words are not handed
  to the reader) is the positive; two other sections of the same page (the most
  word-similar to the question, and one at random) are the negatives: same subject,
  they do not say how.

Every 4th page (sorted by path) is the test split. The React documentation is CC BY 4.0
(react.dev); ragline's reader is trained on it with that attribution.

    python training/howto_data.py --docs ../shared/data/react-docs/en --out training/howto.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from reader_data import overlap, words

HEADING = re.compile(r"^(#{2,4})\s+(.+?)\s*$")
ANCHOR = re.compile(r"\s*\{/\*.*?\*/\}")
TAG_LINE = re.compile(r"^\s*</?[A-Z][A-Za-z]*(\s[^>]*)?/?>\s*$")
TITLE = re.compile(r"^title:\s*['\"]?(.+?)['\"]?\s*$", re.MULTILINE)
STEP = re.compile(r"^(step|option)\s+\d+\s*:\s*", re.IGNORECASE)
API = re.compile(r"^`([^`]+)`")
#: Sections that answer no question of their own (lists of links, summaries, exercises).
SKIP = frozenset(
    [
        "recap",
        "what's next?",
        "reference",
        "usage",
        "troubleshooting",
        "challenges",
        "try out some challenges",
        "next steps",
        "overview",
    ]
)
#: Words that read as verbs to the gerund rule but head names ("React DOM").
NOT_VERBS = frozenset(["react", "server", "client", "state", "effect", "ref", "hook"])
#: The longest body given to the reader (its window is 256 tokens; the rest overflows).
MAX_BODY = 1500
MIN_BODY = 160


def sections(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """The page title and its (parent heading, heading, body) sections, MDX tags removed."""
    title_m = TITLE.search(text[:500])
    title = title_m.group(1) if title_m else ""
    body = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.DOTALL)
    out: list[tuple[str, str, str]] = []
    parents: dict[int, str] = {}
    current: tuple[str, str] | None = None
    lines: list[str] = []
    in_fence = False

    def close() -> None:
        if current is not None:
            out.append((current[0], current[1], "\n".join(lines).strip()))

    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else HEADING.match(line)
        if m:
            close()
            level, heading = len(m.group(1)), ANCHOR.sub("", m.group(2)).strip()
            parents[level] = heading
            current = (parents.get(level - 1, ""), heading)
            lines = []
        elif not TAG_LINE.match(line):
            lines.append(ANCHOR.sub("", line))
    close()
    return title, out


def vocabulary(texts: list[str]) -> Counter[str]:
    return Counter(w for t in texts for w in re.findall(r"[a-z]+", t.lower()))


def base_form(gerund: str, vocab: Counter[str]) -> str | None:
    """``updating`` → ``update``: the candidate base form seen most often in the corpus."""
    stem = gerund[:-3]
    options = [stem, stem + "e"]
    if len(stem) > 2 and stem[-1] == stem[-2]:
        options.append(stem[:-1])  # setting → set
    best = max(options, key=lambda w: vocab.get(w, 0))
    return best if vocab.get(best, 0) >= 2 else None


def question_for(parent: str, heading: str, vocab: Counter[str], verbs: set[str]) -> str | None:
    """The question a section answers, from its heading (None: not a question we can ask)."""
    h = STEP.sub("", heading).strip().rstrip(".")
    if not h or h.lower() in SKIP:
        return None
    if h.endswith("?"):
        return h
    api = API.match(parent)
    name = api.group(1).split("(")[0] if api else ""
    low = h.lower()
    if name and low in ("returns", "return value"):
        return f"What does `{name}` return?"
    if name and low == "parameters":
        return f"What parameters does `{name}` take?"
    if name and low == "caveats":
        return f"What are the caveats of `{name}`?"
    first, _, rest = h.partition(" ")
    if not rest or rest.lower().startswith("and ") or first.lower() in NOT_VERBS:
        return None
    f = first.lower()
    if f.endswith("ing") and len(f) > 5:
        verb = base_form(f, vocab)
        return f"How do I {verb} {rest[0].lower() + rest[1:]}?" if verb else None
    if f in verbs:
        return f"How do I {f} {rest[0].lower() + rest[1:]}?"
    return None


def passage(title: str, body: str) -> str:
    """What the reader is given: the page title, then the section's body."""
    return f"{title}\n{body}" if title else body


def howto_pairs(folder: Path, rng: random.Random) -> Iterator[dict[str, object]]:
    pages = sorted(folder.rglob("*.md"))
    texts = [p.read_text(encoding="utf-8") for p in pages]
    vocab = vocabulary(texts)
    parsed = [sections(t) for t in texts]
    verbs = {
        v
        for _, secs in parsed
        for _, h, _ in secs
        if (f := h.split(" ", 1)[0].lower()).endswith("ing") and (v := base_form(f, vocab))
    }
    for index, (path, (title, secs)) in enumerate(zip(pages, parsed, strict=True)):
        split = "test" if index % 4 == 3 else "train"
        usable = [(p, h, b[:MAX_BODY]) for p, h, b in secs if len(b) >= MIN_BODY]
        for i, (parent, heading, body) in enumerate(usable):
            q = question_for(parent, heading, vocab, verbs)
            if q is None:
                continue
            row = {
                "q": q,
                "split": split,
                "article": str(path.relative_to(folder)),
                "start": -1,
                "answer": "",
                "spanless": True,
            }
            yield {**row, "p": passage(title, body), "label": 1, "source": "howto"}
            # Every other section of the page, by position: another API's "Returns"
            # on the same page is a negative too.
            others = [b for j, (_, _, b) in enumerate(usable) if j != i]
            if not others:
                continue
            qw = words(q)
            ranked = sorted(others, key=lambda b: -overlap(qw, words(b)))
            picks = [ranked[0]] + ([rng.choice(ranked[1:])] if len(ranked) > 1 else [])
            for other in picks:
                yield {**row, "p": passage(title, other), "label": 0, "source": "howto-same-page"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=Path, default=Path("../shared/data/react-docs/en"))
    ap.add_argument("--out", type=Path, default=Path("training/howto.jsonl"))
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    rows = list(howto_pairs(args.docs, random.Random(args.seed)))
    with args.out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = Counter((str(r["split"]), str(r["source"])) for r in rows)
    for key in sorted(counts):
        print(*key, counts[key], sep="\t")


if __name__ == "__main__":
    main()
