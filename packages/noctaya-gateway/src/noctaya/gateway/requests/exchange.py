"""The guards of one HTTP exchange, shared by every HTTP server that speaks to clients: the
gateway's app and local mode's endpoint in front of the gateways.

Each response write is bounded by the send timeout (a client that stops reading is let go); on
HTTP/1.1 the last write of a response waits until the request body has been read (so the
connection can be reused), and a request framed both by `Content-Length` and
`Transfer-Encoding` gets its answer with the connection closed after it (request smuggling).
"""

from __future__ import annotations

from typing import Any

from noctaya.gateway.requests.client import ClientChannel, ambiguous_framing
from noctaya.gateway.requests.responses import Receive, Send, closing
from noctaya.gateway.requests.send_timeout import SendDeadline


def open_exchange(
    scope: dict[str, Any], receive: Receive, send: Send, max_body: int, send_timeout: float
) -> tuple[ClientChannel, Send, SendDeadline, bool]:
    """The exchange's client channel, its guarded `send`, the deadline to `close()` when the
    exchange is over, and whether it is HTTP/1.x."""
    channel = ClientChannel(receive, max_body)
    send = deadline = SendDeadline(send, send_timeout)
    http1 = scope["http_version"][0] == "1"
    if http1 and ambiguous_framing(scope):
        send = closing(send)
    if http1:
        send = channel.guard(send)
    return channel, send, deadline, http1
