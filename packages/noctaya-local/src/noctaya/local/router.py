"""Local mode's endpoint: one OpenAI-compatible address for every service, routed by `model`.

A request is read whole (within the gateways' body limit), then sent to the gateway of the
service whose model it names; the gateway queues it, holds it while the engine starts, or
rejects it, per that service's settings. What the endpoint answers itself, waking nothing:

- `GET /v1/models` and `GET /v1/models/{id}` (or HEAD, with or without a trailing slash: the
  gateway's `model_list_target` decides): from the manifests, with each model's state;
- an unknown model: the OpenAI 404 (`model_not_found`) listing the models there are;
- no `model` while several services are served: the OpenAI 400 listing them;
- `/healthz`, `/metrics` (every service, `local_metrics`) and `/noctaya/status` (JSON).

With `--api-key-file`, every request but `/healthz` must carry the key (a Bearer token, as
Prometheus sends one from `authorization: credentials_file:`), and is refused before anything
else: local mode often listens where no network policy stands in front of it.

A service's own endpoint (`serving.noctaya.io/local-listen`) is this app fixed to one service:
everything goes to it, whatever `model` says, and its model list names only its models.

Every routed request counts in its service's traffic from arrival to the last byte of its
response (`noctaya.local.traffic`), and a held stream's heartbeats say what the service
is doing (`noctaya.local.heartbeats`).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from noctaya.gateway.metrics.exposition import CONTENT_TYPE
from noctaya.gateway.metrics.gateway_metrics import GatewayMetrics
from noctaya.gateway.process.config import (
    DEFAULT_CLIENT_SEND_TIMEOUT,
    DEFAULT_MAX_REQUEST_BODY,
    DEFAULT_REQUEST_BODY_TIMEOUT,
)
from noctaya.gateway.requests.auth import ApiKeyAuth
from noctaya.gateway.requests.client import BodyTooLarge, ClientChannel, ClientGone
from noctaya.gateway.requests.client_endpoint import ClientEndpoint
from noctaya.gateway.requests.model_list import model_list_target
from noctaya.gateway.requests.proxy import Upstream, UpstreamUnavailable
from noctaya.gateway.requests.responses import (
    BODY_TOO_LARGE,
    JSON,
    GatewayError,
    Send,
    is_openai_path,
    send_body,
    send_error,
)
from noctaya.local.heartbeats import PhaseStream
from noctaya.local.routes import Route, RouteTable
from noctaya.local.service_view import ServiceView, phase, view

GATEWAY_WAIT = 30.0
"""How long a request waits for its service's gateway to serve (it starts, or restarts after a
change of its file) before a 503."""
_OWNER = "noctaya"
_SHOWN = 256
Metrics = Callable[[], Awaitable[str]]


class LocalEndpoint(ClientEndpoint):
    """The ASGI app of the shared endpoint (`service` None) or of one service's own."""

    def __init__(
        self,
        routes: RouteTable,
        metrics: Metrics,
        *,
        service: str | None = None,
        api_key_file: str | None = None,
    ) -> None:
        self._routes = routes
        self._metrics = metrics
        self._service = service
        self.max_body = DEFAULT_MAX_REQUEST_BODY
        self.body_timeout = DEFAULT_REQUEST_BODY_TIMEOUT.seconds
        self.send_timeout = DEFAULT_CLIENT_SEND_TIMEOUT.seconds
        self.auth = ApiKeyAuth(api_key_file) if api_key_file else None
        self._streams: set[PhaseStream] = set()
        self._announcing: set[asyncio.Task[None]] = set()
        self._upstream_metrics = GatewayMetrics()  # counted by the gateways; not served here

    def phases_changed(self) -> None:
        """A service's phase may have changed: held clients are told at once."""
        for stream in list(self._streams):
            if stream.due():
                task = asyncio.ensure_future(stream.announce())
                self._announcing.add(task)
                task.add_done_callback(self._announcing.discard)

    def answer(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, http1: bool
    ) -> Awaitable[None]:
        if scope["path"] == "/healthz":
            return send_body(send, 200, b"", b"")
        return self._serve(scope, channel, send, http1)

    async def _serve(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, http1: bool
    ) -> None:
        """With `--api-key-file` everything but `/healthz` needs the key, checked first: the
        status and the metrics name every model, and a request that reached a service's traffic
        would count as a client waiting for it (enough to take devices from another engine)."""
        path = scope["path"]
        if not await self.authorized(scope, send, is_openai_path(path)):
            return
        if path == "/metrics":
            await send_body(send, 200, CONTENT_TYPE.encode(), (await self._metrics()).encode())
        elif path == "/noctaya/status":
            await send_body(send, 200, JSON, _json({"services": self._views()}))
        elif (target := model_list_target(scope)) is not None:
            await self._model_list(target, send)
        else:
            await self._route(scope, channel, send, http1)

    def _served(self) -> list[Route]:
        if self._service is None:
            return self._routes.routes()
        route = self._routes.get(self._service)
        return [] if route is None else [route]

    def _views(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [_view_json(view(route, now)) for route in self._served()]

    async def _model_list(self, target: str, send: Send) -> None:
        now = time.monotonic()
        models = [
            _model_json(name, route, view(route, now))
            for route in self._served()
            for name in route.plan.gateway.served_models or (route.model,)
        ]
        if not target:
            await send_body(send, 200, JSON, _json({"object": "list", "data": models}))
            return
        found = next((model for model in models if model["id"] == target), None)
        if found is None:
            await send_error(send, self._unknown(target), True)
            return
        await send_body(send, 200, JSON, _json(found))

    async def _route(
        self, scope: dict[str, Any], channel: ClientChannel, send: Send, http1: bool
    ) -> None:
        openai = is_openai_path(scope["path"])
        body = await self.read_body(scope, channel, send, openai, http1)
        if body is None:
            return
        channel.watch()
        chosen = self._choose(body)
        if isinstance(chosen, GatewayError):
            await send_error(send, chosen, openai)
            return
        route, body = chosen
        await self._forward(route, scope, channel, body, send, openai)

    def _choose(self, body: bytes) -> tuple[Route, bytes] | GatewayError:
        """The route for `body` and the body to send it (`model` renamed to the engine's name
        if it named the service), or the error to answer."""
        named = _model_of(body)
        if self._service is not None:
            route = self._routes.get(self._service)
        elif named is None:
            served = self._routes.routes()
            if len(served) != 1:
                return self._model_required()
            route = served[0]
        else:
            route = self._routes.for_model(named.model)
            if route is None:
                return self._unknown(named.model)
        if route is None:
            return _UNAVAILABLE
        if named is not None and named.model not in route.plan.gateway.served_models:
            body = named.renamed(route.model)
        return route, body

    async def _forward(
        self,
        route: Route,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes,
        send: Send,
        openai: bool,
    ) -> None:
        stream = PhaseStream(send, lambda: phase(route))
        route.traffic.began()
        self._streams.add(stream)
        try:
            with channel.gone_cancels():
                pool = await route.gateway(GATEWAY_WAIT)
                if pool is None:
                    await send_error(send, _UNAVAILABLE, openai)
                    return
                upstream = Upstream(pool, self._upstream_metrics, strip_authorization=False)
                await upstream.forward(scope, channel, body, stream.send)
        except ClientGone:
            return
        except BodyTooLarge:
            await send_error(send, BODY_TOO_LARGE, openai)
        except UpstreamUnavailable as failure:
            await send_error(send, failure.error, openai)
        finally:
            stream.close()
            self._streams.discard(stream)
            route.traffic.ended()

    def _unknown(self, model: str) -> GatewayError:
        shown = model if len(model) <= _SHOWN else model[:_SHOWN] + "..."
        return GatewayError(
            404,
            f"The model {json.dumps(shown)} does not exist; this endpoint serves "
            f"{_listed(self._model_names())}",
            "invalid_request_error",
            "model_not_found",
        )

    def _model_required(self) -> GatewayError:
        return GatewayError(
            400,
            "you must provide a model parameter: this endpoint serves "
            f"{_listed(self._model_names())}",
            "invalid_request_error",
            "model_required",
        )

    def _model_names(self) -> list[str]:
        if self._service is None:
            return self._routes.model_names()
        return sorted(name for route in self._served() for name in route.plan.model_names)


_SPACE = re.compile(r"[ \t\n\r]*")
_BOM = "\ufeff"  # RFC 8259 §8.1: a parser may ignore one
_DECODER = json.JSONDecoder()

_UNAVAILABLE = GatewayError(
    503, "service not available", "server_error", "service_unavailable", ((b"retry-after", b"5"),)
)
"""Its gateway does not serve: the service starts, restarts after a change, or failed."""


def _listed(names: list[str]) -> str:
    return ", ".join(json.dumps(name) for name in names) if names else "no models"


@dataclass(frozen=True, slots=True)
class _NamedModel:
    """The `model` a JSON request body names, and where in the body (decoded) its value is."""

    model: str
    text: str
    start: int
    end: int

    def renamed(self, model: str) -> bytes:
        """The body naming `model` instead, every other byte as the client sent it. Decoding
        the body and encoding it again would not give it back: a lone surrogate escape
        (`"\\ud800"`, which JSON allows) has no UTF-8 form, `1e999` would come back as
        `Infinity`, which is no JSON at all."""
        value = json.dumps(model, ensure_ascii=False)
        return (self.text[: self.start] + value + self.text[self.end :]).encode()


def _model_of(body: bytes) -> _NamedModel | None:
    """The request's `model`, if its body is a JSON object (in UTF-8) naming one.

    The object's keys and values are read one by one by `json`'s own decoder, so that what is
    judged JSON, and which `model` counts when there are several (the last, as `json.loads`
    takes it), are what `json.loads` would make of the body."""
    if b'"model"' not in body:
        return None
    try:
        text = body.decode()  # strict: the bytes of a lone surrogate are no UTF-8
        index = _after_space(text, 1 if text.startswith(_BOM) else 0)
        if text[index : index + 1] != "{":
            return None
        found: _NamedModel | None = None
        index = _after_space(text, index + 1)
        more = text[index : index + 1] != "}"
        while more:
            if text[index : index + 1] != '"':
                return None
            key, index = _DECODER.raw_decode(text, index)
            index = _after_space(text, index)
            if text[index : index + 1] != ":":
                return None
            start = _after_space(text, index + 1)
            value, end = _DECODER.raw_decode(text, start)
            if key == "model":
                found = _NamedModel(value, text, start, end) if isinstance(value, str) else None
            index = _after_space(text, end)
            more = text[index : index + 1] == ","
            if more:
                index = _after_space(text, index + 1)
        if text[index : index + 1] != "}" or _after_space(text, index + 1) != len(text):
            return None
    except (ValueError, RecursionError):
        return None
    return found


def _after_space(text: str, index: int) -> int:
    """The index of the first character at or after `index` that is not JSON whitespace."""
    match = _SPACE.match(text, index)
    assert match is not None  # `*` matches the empty string too
    return match.end()


def _view_json(state: ServiceView) -> dict[str, Any]:
    started = state.last_start
    return {
        "service": state.service,
        "model": state.model,
        "state": state.state,
        "devices": list(state.devices),
        "in_flight": state.in_flight,
        "last_request_seconds_ago": state.last_request,
        "last_start": None
        if started is None
        else {
            "stopped": list(started.stopped),
            "stop_seconds": started.stop,
            "start_seconds": started.start,
            "load_seconds": started.load,
        },
    }


def _model_json(name: str, route: Route, state: ServiceView) -> dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": route.created,
        "owned_by": _OWNER,
        "noctaya": {
            "service": route.name,
            "state": state.state,
            "devices": list(state.devices),
        },
    }


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
