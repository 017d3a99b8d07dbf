"""Strings, string slices and integers spelled as the reference's messages spell them.

The reference behaviour quotes values with Go's `%q`, prints slices with `%v` (`[a b]`) and
reads integer settings with `strconv.Atoi`; this module does the same on purpose, because users
and tests compare those messages verbatim. The quoted form is also a valid Python literal, which
the prewarm programs rely on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_GO_DECIMAL = re.compile(r"[+-]?[0-9]+")

_SHORT_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    '"': r"\"",
    "\\": r"\\",
}


def go_quote(text: str) -> str:
    """`text` in double quotes: printable characters verbatim, everything else escaped.

    The escapes (`\\n`, `\\x01`, `\\u2028`, `\\U0001f600`) are also valid Python string escapes,
    so the result can be pasted into generated Python source as a literal.
    """
    return '"' + "".join(_quote_rune(char) for char in text) + '"'


def _quote_rune(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def go_list(items: Iterable[str]) -> str:
    """`items` space-separated in brackets: `[a b]`."""
    return "[" + " ".join(items) + "]"


def go_positive_int(text: str) -> int | None:
    """`text` as a number if it is an optional sign and ASCII digits only, and above zero;
    `1_000` or ` 5` are not numbers here."""
    if not _GO_DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if value > 0 else None
