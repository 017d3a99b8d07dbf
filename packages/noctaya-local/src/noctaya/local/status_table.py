"""The status table local mode keeps on the terminal: one row per service."""

from __future__ import annotations

from collections.abc import Sequence

from noctaya.local.service_view import ServiceView

HEADER = ("SERVICE", "MODEL", "STATE", "DEVICES", "IN FLIGHT", "LAST REQUEST")
_WIDTH = 40
"""A column is cut to this many characters (model names can be long paths)."""


def render_table(views: Sequence[ServiceView]) -> list[str]:
    rows = [HEADER] + [
        (
            view.service,
            view.model,
            view.state,
            ",".join(view.devices) or "-",
            str(view.in_flight),
            "-" if view.last_request is None else f"{_age(view.last_request)} ago",
        )
        for view in views
    ]
    cut = [tuple(_cut(cell) for cell in row) for row in rows]
    widths = [max(len(row[column]) for row in cut) for column in range(len(HEADER))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cut
    ]


def _cut(cell: str) -> str:
    return cell if len(cell) <= _WIDTH else cell[: _WIDTH - 1] + "…"


def _age(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
