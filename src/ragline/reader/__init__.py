"""ragline's own reader model: whether, and where, a passage answers a question."""

from ragline.reader.model import Reader, ReaderError, Reading, shared_reader

__all__ = ["Reader", "ReaderError", "Reading", "shared_reader"]
