"""Single-host reverse proxy to the backend: same path and query, bodies streamed both ways and
flushed chunk by chunk (SSE tokens reach the client as the backend writes them), hop-by-hop
headers dropped per RFC 9110 §7.6.1."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from noctaya.gateway.client import ClientChannel
from noctaya.gateway.metrics import GatewayMetrics
from noctaya.gateway.responses import Headers, Send
from yarl import URL

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# Host comes from the backend URL; Date is the gateway server's own (no duplicate header).
_REQUEST_DROP = HOP_BY_HOP | {b"host"}
_RESPONSE_DROP = HOP_BY_HOP | {b"date"}
_BODY_END: dict[str, Any] = {"type": "http.response.body", "body": b"", "more_body": False}


class UpstreamUnavailable(Exception):
    """The backend could not be reached or failed before sending a response head."""


class UpstreamAborted(Exception):
    """The backend failed after the response started; the client exchange must be aborted."""


def create_session(connect_timeout: float = 30.0) -> aiohttp.ClientSession:
    """One shared client: unbounded pool (admission bounds concurrency), no total timeout
    (streams last as long as generation does), raw bytes passed through undecoded, no proxy."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=10, keepalive_timeout=60),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names the sender declared hop-by-hop in `Connection`."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    return frozenset(tokens)


class Upstream:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        backend_url: str,
        metrics: GatewayMetrics,
        *,
        strip_authorization: bool,
    ) -> None:
        parts = urlsplit(backend_url)
        self._session = session
        self._metrics = metrics
        self._prefix = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._request_drop = _REQUEST_DROP | (
            {b"authorization"} if strip_authorization else set()
        )
        self._url = lru_cache(maxsize=512)(self._build_url)

    @property
    def health_url(self) -> str:
        return f"{self._prefix}/health"

    def _build_url(self, raw_path: bytes, query: bytes) -> URL:
        target = self._prefix + raw_path.decode("latin-1")
        if query:
            target += "?" + query.decode("latin-1")
        return URL(target, encoded=True)

    def request_headers(self, scope: dict[str, Any]) -> list[tuple[str, str]]:
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        drop = self._request_drop
        listed = _connection_tokens(raw)
        if listed:
            drop = drop | listed
        headers: list[tuple[str, str]] = []
        forwarded_for: list[str] = []
        for name, value in raw:
            if name in drop:
                continue
            if name == b"x-forwarded-for":
                forwarded_for.append(value.decode("latin-1"))
                continue
            headers.append((name.decode("latin-1"), value.decode("latin-1")))
        client = scope.get("client")
        if client:
            forwarded_for.append(client[0])
        if forwarded_for:
            headers.append(("X-Forwarded-For", ", ".join(forwarded_for)))
        return headers

    async def forward(
        self,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes | AsyncIterable[bytes],
        send: Send,
        *,
        committed: bool = False,
    ) -> None:
        """Proxy one exchange. When `committed`, the client already has its response head (a
        keepalive stream), so only the backend's body is relayed and the stream left open."""
        started = committed
        url = self._url(scope["raw_path"], scope["query_string"])
        try:
            async with self._session.request(
                scope["method"],
                url,
                headers=self.request_headers(scope),
                data=body or None,
                allow_redirects=False,
            ) as response:
                if not committed:
                    await send(
                        {
                            "type": "http.response.start",
                            "status": response.status,
                            "headers": _response_headers(response.raw_headers),
                        }
                    )
                    self._metrics.count_response(response.status)
                    started = True
                await _relay(response.content, send, end=not committed)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if channel.failure is not None:
                raise channel.failure from None
            if started:
                raise UpstreamAborted(str(error) or type(error).__name__) from error
            raise UpstreamUnavailable(str(error) or type(error).__name__) from error


def _response_headers(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    raw = list(raw)
    drop = _RESPONSE_DROP
    listed = _connection_tokens(raw)
    if listed:
        drop = drop | listed
    return [(name.lower(), value) for name, value in raw if name.lower() not in drop]


async def _relay(content: aiohttp.StreamReader, send: Send, *, end: bool) -> None:
    """Copy the backend body as it arrives; the last chunk carries the end when known."""
    while True:
        chunk = await content.readany()
        if not chunk:
            break
        last = end and content.at_eof()
        await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        if last:
            return
    if end:
        await send(_BODY_END)
