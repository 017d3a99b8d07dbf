"""The vLLM-shaped endpoints of the engine stub: health gated by a startup delay, chat and
text completions (streamed token by token or whole), settable vLLM scheduler gauges, a
KV-cache gauge that can follow the streams in flight (`StubSettings.kv_cache_capacity`), a
bound on the streams generated at once (`StubSettings.concurrency`) and a count of the
completions it finished (`vllm:request_success_total`), which tells which replica served."""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Awaitable
from functools import lru_cache
from typing import Any

from noctaya.core.values.go_text import go_positive_int
from noctaya.gateway.engine_stub.http11 import Exchange, Request
from noctaya.gateway.engine_stub.settings import StubSettings

_PLAIN = [(b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff")]
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_METRICS = [(b"content-type", b"text/plain; version=0.0.4")]
_DONE = b"data: [DONE]\n\n"
_COMPLETION_PATHS = {"/v1/chat/completions": True, "/v1/completions": False}  # → is chat
_ALLOWED = {"/health": "GET", "/metrics": "GET", "/control": "POST"} | {
    path: "POST" for path in _COMPLETION_PATHS
}
_TOKENS_PARAM = re.compile(r"(?:^|&)tokens=([^&]*)")
_BAD_GAUGES = "metrics must be non-negative and kv_cache must be between 0 and 1"


def _compact(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@lru_cache(maxsize=1024)
def _chunk(chat: bool, index: int) -> bytes:
    token = f"tok{index} "
    if chat:
        choice: dict[str, Any] = {"index": 0, "delta": {"content": token}}
        document = {"id": "stub-cmpl", "object": "chat.completion.chunk", "choices": [choice]}
    else:
        choice = {"index": 0, "text": token}
        document = {"id": "stub-cmpl", "object": "text_completion", "choices": [choice]}
    return b"data: " + _compact(document) + b"\n\n"


@lru_cache(maxsize=256)
def _completion(chat: bool, tokens: int) -> bytes:
    text = "".join(f"tok{i} " for i in range(tokens))
    if chat:
        message = {"role": "assistant", "content": text}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop"}
        return _compact({"id": "stub-cmpl", "object": "chat.completion", "choices": [choice]})
    choice = {"index": 0, "text": text, "finish_reason": "stop"}
    return _compact({"id": "stub-cmpl", "object": "text_completion", "choices": [choice]})


def _stream_flag(body: bytes) -> bool | None:
    """The request's `stream` (False when absent or null, or when the body is `null`); None
    when the body is not JSON, not an object, or has a `stream` that is not a boolean: the
    stub answers those 400 `invalid JSON request`."""
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    if document is None:
        return False
    if not isinstance(document, dict):
        return None
    stream = document.get("stream")
    if stream is None:
        return False
    return stream if isinstance(stream, bool) else None


def _go_float(value: float) -> str:
    """Shortest form, integral values without a decimal point (`0`, `5`, `0.25`)."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _reject_constant(name: str) -> float:
    raise ValueError(f"invalid JSON value {name}")


class EngineStub:
    """A test double for vLLM. `ready_at` (monotonic seconds) may be moved by tests."""

    def __init__(self, settings: StubSettings) -> None:
        self.settings = settings
        self.ready_at = time.monotonic() + settings.startup_delay
        self.gauges = {"waiting": 0.0, "running": 0.0, "kv_cache": 0.0}
        self.streaming = 0
        """Streamed completions being sent now."""
        self.succeeded = 0
        """Completions answered in full."""
        self._slots = asyncio.Semaphore(settings.concurrency) if settings.concurrency else None

    def __call__(self, request: Request, exchange: Exchange) -> Awaitable[None] | None:
        allowed = _ALLOWED.get(request.path)
        if allowed is None:
            exchange.respond(404, _PLAIN, b"404 page not found\n")
            return None
        if request.method != allowed:
            exchange.respond(405, [*_PLAIN, (b"allow", allowed.encode())], b"method not allowed\n")
            return None
        if request.path == "/health":
            ready = time.monotonic() >= self.ready_at
            exchange.respond(200 if ready else 503, [], b"")
            return None
        if request.path == "/metrics":
            exchange.respond(200, _METRICS, self._metrics())
            return None
        if request.path == "/control":
            self._control(request, exchange)
            return None
        return self._complete(request, exchange, _COMPLETION_PATHS[request.path])

    def _complete(self, request: Request, exchange: Exchange, chat: bool) -> Awaitable[None] | None:
        stream = _stream_flag(request.body)
        if stream is None:
            exchange.respond(400, _PLAIN, b"invalid JSON request\n")
            return None
        tokens = self._tokens(request.query)
        if tokens is None:
            exchange.respond(400, _PLAIN, b"tokens must be a positive integer\n")
            return None
        if not stream:
            exchange.respond(200, _JSON, _completion(chat, tokens))
            self.succeeded += 1
            return None
        if self._slots is None:
            return self._stream(exchange, chat, tokens)
        return self._stream_in_slot(self._slots, exchange, chat, tokens)

    async def _stream_in_slot(
        self, slots: asyncio.Semaphore, exchange: Exchange, chat: bool, tokens: int
    ) -> None:
        async with slots:  # FIFO: asyncio wakes waiters in the order they came
            if not exchange.closed:
                await self._stream(exchange, chat, tokens)

    def _tokens(self, query: str) -> int | None:
        match = _TOKENS_PARAM.search(query)
        if match is None:
            return self.settings.token_count
        return go_positive_int(match.group(1))

    async def _stream(self, exchange: Exchange, chat: bool, tokens: int) -> None:
        exchange.start_stream(200, _SSE)
        delay = self.settings.token_delay
        self.streaming += 1
        try:
            for index in range(tokens):
                if exchange.closed:
                    return
                exchange.write_chunk(_chunk(chat, index))
                if delay > 0:
                    await asyncio.sleep(delay)
        finally:
            self.streaming -= 1
        if exchange.closed:
            return
        exchange.write_chunk(_DONE)
        exchange.end_stream()
        self.succeeded += 1

    def kv_cache(self) -> float:
        """The KV-cache gauge: the share of the capacity in flight, or as `/control` set it."""
        capacity = self.settings.kv_cache_capacity
        if capacity is None:
            return self.gauges["kv_cache"]
        return min(1.0, self.streaming / capacity)

    def _metrics(self) -> bytes:
        lines = []
        for name, value in (
            ("vllm:num_requests_waiting", self.gauges["waiting"]),
            ("vllm:num_requests_running", self.gauges["running"]),
            ("vllm:kv_cache_usage_perc", self.kv_cache()),
        ):
            lines.append(f"# TYPE {name} gauge\n{name} {_go_float(value)}\n")
        lines.append(
            "# TYPE vllm:request_success_total counter\n"
            f"vllm:request_success_total {self.succeeded}\n"
        )
        return "".join(lines).encode()

    def _control(self, request: Request, exchange: Exchange) -> None:
        try:
            document = json.loads(request.body, parse_constant=_reject_constant)
            if not isinstance(document, dict):
                raise ValueError("control body must be a JSON object")
            values = {key: document.get(key, 0) for key in self.gauges}
            for key, value in values.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"{key} must be a number")
        except (ValueError, RecursionError) as error:
            exchange.respond(400, _PLAIN, f"{error}\n".encode())
            return
        gauges = {key: float(value) for key, value in values.items()}
        if any(v < 0 or math.isinf(v) for v in gauges.values()) or gauges["kv_cache"] > 1:
            exchange.respond(400, _PLAIN, f"{_BAD_GAUGES}\n".encode())
            return
        self.gauges = gauges
        exchange.respond(200, [], b"")
