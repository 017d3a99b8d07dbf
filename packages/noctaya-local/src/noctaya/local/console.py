"""Local mode's terminal: its log lines and its processes' relayed output, and, when stderr is a
terminal, the status table kept below them.

Every line goes through `write_line`, so the table is erased before a line is written and drawn
again after it: the log scrolls above a table that stays in place. Without a terminal (a pipe,
a file, CI) nothing but the lines is written.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable

ERASE_LINES = "\x1b[{}F\x1b[J"
"""Cursor to the start of the line `{}` lines up, then clear to the end of the screen."""

_table: Callable[[], list[str]] | None = None
_drawn = 0  # lines of the table on the screen now


def write_line(text: str) -> None:
    """One line to stderr, above the table if one is shown. A closed or full stderr loses the
    line rather than stalling whoever writes it."""
    with contextlib.suppress(OSError, ValueError):
        _erase()
        sys.stderr.write(text + "\n")
        _draw()
        sys.stderr.flush()


def show_table(render: Callable[[], list[str]]) -> bool:
    """Keep `render`'s lines below the log from now on; False (and nothing shown) if stderr is
    no terminal."""
    global _table
    if not sys.stderr.isatty():
        return False
    _table = render
    refresh()
    return True


def refresh() -> None:
    """Draw the table again (its contents changed)."""
    if _table is None:
        return
    with contextlib.suppress(OSError, ValueError):
        _erase()
        _draw()
        sys.stderr.flush()


def hide_table() -> None:
    """Leave the last table on the screen as it is and stop redrawing it."""
    global _table, _drawn
    _table, _drawn = None, 0


def _erase() -> None:
    global _drawn
    if _drawn:
        sys.stderr.write(ERASE_LINES.format(_drawn))
        _drawn = 0


def _draw() -> None:
    global _drawn
    if _table is not None:
        lines = _table()
        sys.stderr.write("".join(line + "\n" for line in lines))
        _drawn = len(lines)


class ConsoleHandler(logging.Handler):
    """A logging handler writing through the console."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            write_line(self.format(record))
        except Exception:
            self.handleError(record)
