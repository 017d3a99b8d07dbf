"""Which path a request names: origin-form as sent, absolute-form reduced to its path.

RFC 9112 §3.2.2 makes servers accept `GET http://host/v1/models HTTP/1.1` (what clients
configured to use a forward proxy send). The gateway then routes and forwards by the URL's path
and query alone: the authority names this gateway and is not passed on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

_SCHEMES = (b"http://", b"https://")


def origin_form(scope: dict[str, Any]) -> dict[str, Any] | None:
    """`scope` with its target in origin form; None if the target is neither form (say `*`)."""
    raw = scope["raw_path"]
    if raw.startswith(b"/"):
        return scope
    if not raw[:8].lower().startswith(_SCHEMES):
        return None
    authority, slash, path = raw.partition(b"://")[2].partition(b"/")
    if not authority:
        return None
    raw_path = slash + path or b"/"
    return {**scope, "raw_path": raw_path, "path": unquote(raw_path.decode("ascii"))}
