"""Markdown tables for generated pages: cells that a pipe or a newline cannot break."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: str) -> str:
    """Table-safe text: one line, pipes escaped (Python-Markdown honours `\\|` in code too)."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    return f"`{cell(text)}`"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
