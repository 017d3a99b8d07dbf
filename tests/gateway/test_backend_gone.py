"""The backend's Service changing under the gateway. A backend scaled away between the moment
the gateway saw it ready and the moment a request goes to it: the request waits for the next
backend like any cold request, instead of being answered 502 (or, on a committed stream, an
error event), and connections to the backend that went are not reused. A probe lost while the
Service's routes change: the next one, on a new connection, finds the backend ready."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import aiohttp

from .conftest import StartGateway
from .raw_backend import read_request
from .support import eventually, metric, read_events

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'


@dataclass
class Backend:
    """A backend on a fixed loopback port that can be scaled away (its listener and every
    connection closed) and started again, counting the connections it accepted."""

    port: int = 0
    ready: bool = True
    close_after_health: bool = False  # answers /health with `Connection: close`, then goes
    hanging: int = 0  # the first connections, read but never answered
    connections: int = 0
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self.server.sockets[0].getsockname()[1]

    def scale_away(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        if self.connections <= self.hanging:
            with contextlib.suppress(ConnectionError):
                await reader.read()  # silent until the gateway gives up on it
            return
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await read_request(reader)
                if head.startswith(b"GET /health "):
                    status = b"200 OK" if self.ready else b"503 Service Unavailable"
                    close = b"connection: close\r\n" if self.close_after_health else b""
                    writer.write(b"HTTP/1.1 %s\r\n%scontent-length: 0\r\n\r\n" % (status, close))
                    if self.close_after_health:
                        self.scale_away()
                        return
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
                )
        writer.close()


async def test_a_request_racing_a_backend_scaled_away_waits_for_the_next_one(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Readiness is cached; the backend goes while the cache still says ready. The request's
    connection is refused: nothing reached a backend, so it is a cold request, and the next
    backend answers it."""
    backend = Backend()
    await backend.start()
    gateway = await start_gateway(backend.url, readiness_interval=60.0)
    url = f"{gateway.url}/v1/chat/completions"
    async with http.post(url, json=CHAT) as response:
        assert response.status == 200  # readiness cached for a minute, connection pooled
    backend.scale_away()
    request = asyncio.ensure_future(http.post(url, json=CHAT))
    assert gateway.server.app is not None
    lease = gateway.server.app.demand.lease
    await eventually(lambda: lease.active, what="the request to start the activation lease")
    assert gateway.pending == 1
    await asyncio.sleep(0.2)
    assert not request.done(), "held for the next backend, not answered"
    await backend.start()
    async with await request as response:
        assert response.status == 200
        assert await response.read() == ANSWER
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_requests_total", {"code": "502"}) is None
    assert "noctaya_gateway_activation_wait_seconds_count 1" in text


async def test_a_held_stream_whose_backend_goes_before_the_request_reaches_it_waits_on(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """The probe finds a backend ready that is gone a moment later: the stream, already
    committed, keeps its heartbeats and waits again within the same deadline."""
    backend = Backend(close_after_health=True)
    await backend.start()
    backend.scale_away()  # cold
    gateway = await start_gateway(backend.url, heartbeat_interval=0.05)
    async with http.post(
        f"{gateway.url}/v1/chat/completions", json={**CHAT, "stream": True}
    ) as response:
        assert response.status == 200
        assert await response.content.readuntil(b"\n\n") == b": heartbeat\n\n"
        await backend.start()  # ready for one probe, then gone again
        await eventually(lambda: backend.connections == 1, what="the probe that found it ready")
        assert backend.server is not None
        await eventually(lambda: not backend.server.is_serving(), what="the backend to go")
        await asyncio.sleep(0.2)
        backend.close_after_health = False
        await backend.start()
        blocks = await read_events(response)
    assert "event: error" not in "\n".join(blocks)
    assert blocks[-2:] == ['data: {"choices":[]}', "data: [DONE]"]
    assert set(blocks[:-2]) == {": heartbeat"}
    text = await gateway.metrics(http)
    assert "noctaya_gateway_activation_wait_seconds_count 1" in text


async def test_a_backend_found_not_ready_leaves_no_connection_to_reuse(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """Connections kept to a backend that stopped being ready lead to one that is going away:
    the first request after it is ready again takes a fresh connection."""
    backend = Backend()
    await backend.start()
    gateway = await start_gateway(backend.url)
    url = f"{gateway.url}/v1/chat/completions"
    async with http.post(url, json=CHAT) as response:
        assert response.status == 200
    assert backend.connections == 1
    assert gateway.server.app is not None
    readiness = gateway.server.app.readiness
    backend.ready = False
    await asyncio.sleep(0.06)  # the cached answer (50 ms) runs out
    assert not await readiness.ready()
    backend.ready = True
    async with http.post(url, json=CHAT) as response:
        assert response.status == 200
    assert backend.connections == 2


async def test_a_probe_that_hangs_does_not_hold_back_the_next(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """While requests wait, a probe that gets no answer (its SYN lost to a route kube-proxy
    just removed, retried by TCP on that same route) does not make them wait out its 2 s
    timeout: the next poll probes again on a new connection."""
    backend = Backend(hanging=1)
    await backend.start()
    backend.scale_away()  # cold: connections refused
    gateway = await start_gateway(backend.url, readiness_timeout=2.0, held_readiness_interval=0.05)
    request = asyncio.ensure_future(http.post(f"{gateway.url}/v1/chat/completions", json=CHAT))
    await eventually(lambda: gateway.pending == 1, what="the request to be held")
    await backend.start()
    started = time.monotonic()
    async with await request as response:
        assert response.status == 200
        assert await response.read() == ANSWER
    assert time.monotonic() - started < 1.0
    assert backend.connections >= 2


async def test_a_request_that_finds_the_answer_expired_does_not_wait_out_a_probe_that_hangs(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """A request arriving right after a wake, when no answer is cached, asks for a probe; if
    that one hangs (its SYN lost while kube-proxy rewrites the Service's rules), another on a
    new connection answers, and the request goes to the ready backend within a fraction of
    the probe's 2 s timeout, never counted as a cold wait."""
    backend = Backend(hanging=1)
    await backend.start()
    gateway = await start_gateway(backend.url, readiness_timeout=2.0, held_readiness_interval=0.05)
    started = time.monotonic()
    async with http.post(f"{gateway.url}/v1/chat/completions", json=CHAT) as response:
        assert response.status == 200
        assert await response.read() == ANSWER
    assert time.monotonic() - started < 1.0
    assert backend.connections >= 2
    text = await gateway.metrics(http)
    assert metric(text, "noctaya_gateway_activation_wait_seconds_count") == 0


async def test_probes_that_hang_one_after_another_do_not_stop_the_polls(
    start_gateway: StartGateway, http: aiohttp.ClientSession
) -> None:
    """While kube-proxy rewrites the Service's rules every SYN may be lost for a while, each
    probe then waiting for its connection's next attempt: the polls go on probing on new
    connections meanwhile, and the first to be answered ends the wait."""
    backend = Backend(hanging=6)
    await backend.start()
    backend.scale_away()
    gateway = await start_gateway(backend.url, readiness_timeout=2.0, held_readiness_interval=0.05)
    request = asyncio.ensure_future(http.post(f"{gateway.url}/v1/chat/completions", json=CHAT))
    await eventually(lambda: gateway.pending == 1, what="the request to be held")
    await backend.start()
    started = time.monotonic()
    async with await request as response:
        assert response.status == 200
        assert await response.read() == ANSWER
    assert time.monotonic() - started < 1.0
    assert backend.connections >= 7
