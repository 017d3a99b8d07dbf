"""The one error local mode reports for input it cannot serve (exit code 2)."""

from __future__ import annotations


class LocalConfigError(ValueError):
    """Input local mode cannot serve; the message names the file, document or field at fault."""


class LocalRunError(RuntimeError):
    """Local mode could not start or keep serving (exit code 1); the message says why."""
