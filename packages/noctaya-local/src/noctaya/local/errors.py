"""The errors local mode reports as one line: input it cannot serve (exit code 2) and failures
to serve (exit code 1)."""

from __future__ import annotations

MESSAGE_MAX = 2000
"""Characters of a message printed; an echoed value can make one a megabyte long."""


class LocalConfigError(ValueError):
    """Input local mode cannot serve; the message names the file, document or field at fault."""


class LocalRunError(RuntimeError):
    """Local mode could not start or keep serving (exit code 1); the message says why."""


def one_line(text: str) -> str:
    """`text` on one line (whitespace runs become one space), cut at MESSAGE_MAX characters."""
    line = " ".join(text.split())
    if len(line) > MESSAGE_MAX:
        return f"{line[:MESSAGE_MAX]}... ({len(line)} characters)"
    return line
