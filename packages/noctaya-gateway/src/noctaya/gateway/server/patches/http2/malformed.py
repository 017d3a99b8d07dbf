"""Which HTTP/2 request heads are malformed, judged per stream.

h2 validates request heads itself but raises a connection-wide error, so one uppercase header
name or `te: gzip` ends every other request multiplexed on the connection (a streaming
completion included); and hypercorn crashes the connection on a head h2 lets through, a
non-ASCII `:path` or a CONNECT without one. RFC 9113 makes a malformed request a stream error:
the gateway runs h2's own checks, plus hypercorn's assumptions, for each request and resets only
the offending stream. A body that disagrees with its `content-length` is malformed too, which
h2 finds only as the DATA arrives (`stream_scoped`).
"""

from __future__ import annotations

import h2.exceptions
from h2.utilities import HeaderValidationFlags, validate_headers

_REQUEST = HeaderValidationFlags(
    is_client=False, is_trailer=False, is_response_header=False, is_push_promise=False
)


def is_malformed(headers: list[tuple[bytes, bytes]]) -> bool:
    try:
        for _ in validate_headers(headers, _REQUEST):
            pass
    except h2.exceptions.ProtocolError:
        return True
    method = path = None
    for name, value in headers:
        if name == b":method":
            method = value
        elif name == b":path":
            path = value
    if method is None or path is None:
        return True  # a CONNECT: only an origin server's own methods are served here
    return not (method.isascii() and path.isascii())
