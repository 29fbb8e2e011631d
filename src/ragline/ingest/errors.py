"""The one error ingestion raises for a bad file, so a run can report it and go on."""

from __future__ import annotations

from ragline.errors import InputError


class IngestError(InputError):
    """A file could not be ingested; says which file, where, and why.

    ``str()`` reads like a compiler message (``docs/a.md:12: broken front matter: …``)
    so editors and CI logs can jump to the spot.
    """

    def __init__(
        self, source: str, line: int | None, reason: str, *, environment: bool = False
    ) -> None:
        super().__init__(source, line, reason)
        self.source = source
        self.line = line
        self.reason = reason
        #: The failure depends on this machine (a missing extra, no Tesseract), not on
        #: the file alone: a later run must try the file again rather than recall it.
        self.environment = environment

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.reason}"
