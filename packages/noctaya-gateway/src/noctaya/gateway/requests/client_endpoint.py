"""What every HTTP server facing clients does before its own routes, in one place: the gateway's
app and local mode's endpoint in front of the gateways answer the ASGI lifespan, refuse
WebSocket handshakes and CONNECT, answer a request target they cannot route with 400, bound each
exchange (`open_exchange`), check the API key and read a request body within its limits in the
same way, so a hostile client meets the very same guards at either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from noctaya.gateway.requests.auth import ApiKeyAuth, AuthResult
from noctaya.gateway.requests.client import BodyTooLarge, ClientChannel, ClientGone, declared_length
from noctaya.gateway.requests.exchange import open_exchange
from noctaya.gateway.requests.lifespan import serve_lifespan
from noctaya.gateway.requests.request_target import origin_form
from noctaya.gateway.requests.responses import (
    AUTHENTICATION_UNAVAILABLE,
    BODY_TOO_LARGE,
    METHOD_NOT_ALLOWED,
    REQUEST_TIMEOUT,
    UNAUTHORIZED,
    WEBSOCKET_UNSUPPORTED,
    GatewayError,
    Receive,
    Send,
    closing,
    is_openai_path,
    send_bad_request,
    send_error,
)
from noctaya.gateway.requests.send_timeout import ClientStalled


class ClientEndpoint:
    """An ASGI app; a subclass sets the limits and the key and routes in `answer`."""

    max_body: int
    body_timeout: float
    send_timeout: float
    auth: ApiKeyAuth | None = None

    def answer(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, http1: bool
    ) -> Awaitable[None]:
        """The exchange's answer, `scope` in origin form. An awaitable handed back rather than
        awaited here: a held request keeps one frame less."""
        raise NotImplementedError

    async def refuse(
        self, send: Send, error: GatewayError, openai: bool, reason: str = "", kind: str = "http"
    ) -> None:
        """Answer `error` (`reason`: why a request was refused, for a subclass that counts it)."""
        await send_error(send, error, openai, kind)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await serve_lifespan(receive, send)
            return
        if kind == "websocket":
            # HTTP only; a handshake gets an answer, not hypercorn's 500.
            await self.refuse(send, WEBSOCKET_UNSUPPORTED, is_openai_path(scope["path"]), kind=kind)
            return
        if kind != "http":
            return
        channel, send, deadline, http1 = open_exchange(
            scope, receive, send, self.max_body, self.send_timeout
        )
        origin = origin_form(scope)
        try:
            if scope["method"] == "CONNECT":
                # Closed after the 405: a client that sent its tunnel's first bytes behind the
                # CONNECT must not have them read as its next request.
                refused = closing(send) if http1 else send
                await self.refuse(refused, METHOD_NOT_ALLOWED, is_openai_path(scope["path"]))
            elif origin is None:
                await send_bad_request(send, close=http1)
            else:
                await self.answer(origin, channel, send, http1)
        except ClientStalled:
            return  # the server ends the response unfinished: HTTP/1.1 closes, HTTP/2 resets
        finally:
            channel.finish()
            deadline.close()

    async def authorized(self, scope: dict[str, Any], send: Send, openai: bool) -> bool:
        """With an API key, a request must carry it; refused (401, or 503 while the key cannot
        be read) otherwise."""
        if self.auth is None:
            return True
        authorization = next(
            (value for name, value in scope["headers"] if name == b"authorization"), None
        )
        result = await self.auth.check(authorization)
        if result is AuthResult.OK:
            return True
        error = UNAUTHORIZED if result is AuthResult.UNAUTHORIZED else AUTHENTICATION_UNAVAILABLE
        await self.refuse(send, error, openai, reason=result.value)
        return False

    async def read_body(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, openai: bool, http1: bool
    ) -> bytes | None:
        """The whole request body, within the body limit and deadline; None once it was refused
        (413, 408) or the client left."""
        if declared_length(scope) > self.max_body:
            await self.refuse(send, BODY_TOO_LARGE, openai)
            return None
        try:
            async with asyncio.timeout(self.body_timeout):
                return await channel.read_all()
        except BodyTooLarge:
            await self.refuse(send, BODY_TOO_LARGE, openai)
        except ClientGone:
            pass
        except TimeoutError:
            # The rest of the body is not worth waiting for on this connection either.
            await self.refuse(closing(send) if http1 else send, REQUEST_TIMEOUT, openai)
        return None
