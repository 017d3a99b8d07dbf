"""Reading the Markdown tables of the manual, for tests that check them against the code."""

from __future__ import annotations

from pathlib import Path


def table_after(page: Path, marker: str) -> list[list[str]]:
    """The cells of the first table from `marker` on, header and rule skipped."""
    text = page.read_text(encoding="utf-8")
    lines = text[text.index(marker) :].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows
