"""Letting go of a connection at once when its client can send nothing more.

Hypercorn 0.18 stops reading at the client's EOF (or a read error) but leaves an idle connection
to its keep-alive timer, 120 s here: every client that closes after its answer left its socket,
its task and about 12 KiB in the gateway for two minutes (4,000 short-lived connections held
4,000 descriptors). Once the client's side is done, an idle connection can never carry another
request, so its timer fires at once, over HTTP/1.1 and HTTP/2 alike. A connection with a request
in progress is left as hypercorn leaves it: the EOF ends the exchange as a client disconnect,
since a half-close is indistinguishable on the wire from a client that closed and went away.
"""

from __future__ import annotations

import asyncio

from hypercorn.asyncio.tcp_server import TCPServer
from noctaya.gateway.hypercorn_version import require_tested_hypercorn

_read_until_done = TCPServer._read_data
_idle_timer = TCPServer._idle_timeout


def _client_done(server: TCPServer) -> bool:
    return server.reader.at_eof() or server.reader.exception() is not None


async def _read_data(self: TCPServer) -> None:
    await _read_until_done(self)
    if self.idle_task._handle is not None:  # the idle timer runs: no request in progress
        await self.idle_task.restart(self._task_group, self._idle_timeout)


async def _idle_timeout(self: TCPServer) -> None:
    if _client_done(self):
        # Also when a stream ends after the EOF and hypercorn re-arms the timer.
        await asyncio.shield(self._initiate_server_close())
    else:
        await _idle_timer(self)


def install() -> None:
    """Idempotent; raises UntestedHypercorn, changing nothing, on an untested hypercorn."""
    require_tested_hypercorn()
    TCPServer._read_data = _read_data  # type: ignore[method-assign]
    TCPServer._idle_timeout = _idle_timeout  # type: ignore[method-assign]
