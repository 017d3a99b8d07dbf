"""The ASGI lifespan protocol, for apps with nothing to start or stop with the server."""

from __future__ import annotations

from noctaya.gateway.requests.responses import Receive, Send


async def serve_lifespan(receive: Receive, send: Send) -> None:
    """Acknowledge startup and shutdown, so hypercorn neither waits nor logs a lifespan error."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
