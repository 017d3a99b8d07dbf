"""Errors as values: a machine reason and a human message that travel unchanged to a condition."""

from __future__ import annotations


class NoctayaError(Exception):
    """A failure with a condition `reason` (CamelCase) and a message that names the field."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reason={self.reason!r}, message={self.message!r})"
