"""The benchmarks' tables: a title, right-aligned columns under a ruled header."""

from __future__ import annotations

import sys


def print_table(title: str, headers: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    cells = [list(headers), *[[str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))
    sys.stdout.flush()
