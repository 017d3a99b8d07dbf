"""Is a decoded document JSON at all? The checks that must come before pydantic sees it.

YAML and careless clients hand over values no JSON document holds, and Python raises on some of
them outside any validator: integers beyond 4,300 digits cannot be printed, lone surrogates
cannot be encoded, and deep nesting exhausts the stack. One iterative walk finds them first, so
they are reported like any other invalid field, and `quote` can print any value in a message.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 100
"""Far deeper than any manifest of this API (or its managedFields) ever nests."""
_INT64 = range(-(2**63), 2**63)
_QUOTE_LIMIT = 80
_DIGITS_SHOWN = 20
_LOG10_2 = 0.30103


def field_path(loc: tuple[int | str, ...]) -> str:
    """`("spec", "container", "env", 0, "name")` → `spec.container.env[0].name`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def shape_problems(document: Any) -> list[str]:
    """`path: problem` for every node a JSON document cannot hold, in breadth-first order."""
    problems: list[str] = []
    pending: deque[tuple[tuple[int | str, ...], Any]] = deque([((), document)])
    while pending:
        loc, node = pending.popleft()
        where = field_path(loc) or "(root)"
        if len(loc) > MAX_DEPTH:
            problems.append(f"{where}: must not nest deeper than {MAX_DEPTH} levels")
        elif isinstance(node, Mapping):
            for key, child in node.items():
                if not isinstance(key, str):
                    problems.append(f"{where}: keys must be strings, got {quote(key)}")
                elif not _encodable(key):
                    problems.append(f"{where}: key {quote(key)}: must be valid UTF-8 text")
                else:
                    pending.append(((*loc, key), child))
        elif isinstance(node, list):
            pending.extend(((*loc, index), child) for index, child in enumerate(node))
        elif isinstance(node, str):
            if not _encodable(node):
                problems.append(f"{where}: must be valid UTF-8 text, got {quote(node)}")
        elif isinstance(node, int) and not isinstance(node, bool):
            if node not in _INT64:
                problems.append(
                    f"{where}: Invalid value {quote(node)}: must fit in a 64-bit integer"
                )
        elif not (node is None or isinstance(node, bool | float)):
            problems.append(f"{where}: must be a JSON value, got {type(node).__name__}")
    return problems


def quote(value: Any) -> str:
    """`value` as JSON for a message: ASCII-escaped and cut short, whatever it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer_text(value)
    try:
        text = json.dumps(value, ensure_ascii=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _QUOTE_LIMIT else text[: _QUOTE_LIMIT - 1] + "…"


def _integer_text(value: int) -> str:
    """Any integer, even one too long for `str()`: `10000000000000000000…(5001 digits)`."""
    magnitude = abs(value)
    digits = int(magnitude.bit_length() * _LOG10_2) + 1
    if digits <= _QUOTE_LIMIT // 2:
        return str(value)
    while 10 ** (digits - 1) > magnitude:
        digits -= 1
    leading = magnitude // 10 ** (digits - _DIGITS_SHOWN)
    return f"{'-' if value < 0 else ''}{leading}…({digits} digits)"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
