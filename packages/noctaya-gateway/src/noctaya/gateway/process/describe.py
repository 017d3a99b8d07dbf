"""Error text for a failed startup: one line, without Python's exception decoration, so it reads
the same in every process. File errors are worded as the reference implementation words them
(`open <path>: no such file or directory`), which users and tests compare."""

from __future__ import annotations

import re
import ssl


def describe_error(exc: BaseException) -> str:
    """`open <path>: <reason>` for file errors (`read <path>: is a directory`: a directory
    opens, and fails only when read); OpenSSL errors without C source locations."""
    if isinstance(exc, ssl.SSLError):
        return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc))
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        op = "read" if isinstance(exc, IsADirectoryError) else "open"
        return f"{op} {exc.filename}: {exc.strerror[0].lower()}{exc.strerror[1:]}"
    return str(exc)
