"""Error text in Go's wording (`open <path>: no such file or directory`), one line and without
Python's exception decoration, so a failed startup reads the same in every process."""

from __future__ import annotations

import re
import ssl


def describe_error(exc: BaseException) -> str:
    """`open <path>: <reason>` for file errors (`read <path>: is a directory`, as Go's
    os.ReadFile fails on one); OpenSSL errors without C source locations."""
    if isinstance(exc, ssl.SSLError):
        return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc))
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        op = "read" if isinstance(exc, IsADirectoryError) else "open"
        return f"{op} {exc.filename}: {exc.strerror[0].lower()}{exc.strerror[1:]}"
    return str(exc)
