"""Go's spelling of strings, string slices and integers, as Kubernetes tooling prints them.

Messages embed values with Go's `%q` and slices with `%v` (`[a b]`); users and tests compare
those messages verbatim, and the prewarm programs reuse `%q` output as Python literals.
Settings parse integers as `strconv.Atoi` does, so `1_000` or ` 5` are not numbers here.
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
    """Go's `strconv.Quote` (`%q`): printable runes verbatim, everything else escaped.

    The escapes Go emits (`\\n`, `\\x01`, `\\u2028`, `\\U0001f600`) are also valid Python string
    escapes, so the result can be pasted into generated Python source as a literal.
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
    """Go's `%v` of a string slice: `[a b]`."""
    return "[" + " ".join(items) + "]"


def go_positive_int(text: str) -> int | None:
    """`text` as Go's `strconv.Atoi` reads it (optional sign, ASCII digits) if above zero."""
    if not _GO_DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if value > 0 else None
