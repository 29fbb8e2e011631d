"""The package's exception root: every error ragline raises on purpose is a
:class:`RaglineError`, either an :class:`InputError` (the caller can fix it: a bad
file, field, URL or dataset) or a :class:`FaultError` (a dependency or the machine
failed: store, model, LLM endpoint, log). Interfaces map the first to "fix your
input" (HTTP 400, CLI usage error) and the second to "try again" (503, degraded)."""

from __future__ import annotations


class RaglineError(Exception):
    """Root of ragline's own errors."""


class InputError(RaglineError):
    """Something the caller gave is wrong; retrying the same input fails the same way."""


class FaultError(RaglineError, RuntimeError):
    """A dependency failed; the same request may work later."""
