"""The Date header, formatted once a second: hypercorn formats it anew for every response, a few
per cent of a small request's cost."""

from __future__ import annotations

import time
from wsgiref.handlers import format_date_time

from hypercorn.config import Config

_formatted: tuple[int, bytes] = (0, b"")


def _date() -> bytes:
    global _formatted
    second = int(time.time())
    if _formatted[0] != second:
        _formatted = (second, format_date_time(second).encode("ascii"))
    return _formatted[1]


class DateOncePerSecondConfig(Config):
    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        if self.include_server_header or self.alt_svc_headers or self._quic_addresses:
            return super().response_headers(protocol)
        return [(b"date", _date())] if self.include_date_header else []
