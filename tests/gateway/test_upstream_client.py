"""The gateway's upstream client against backends that speak HTTP/1.1 in every permitted way
(and some forbidden ones), through a real gateway."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from noctaya.gateway.upstream import UpstreamClosed, UpstreamPool
from noctaya.gateway.upstream import pool as upstream_pool
from noctaya.gateway.upstream.connection import Http1Connection

from .conftest import StartGateway
from .raw_backend import Handler, StartBackend, health_then, read_request
from .raw_backend import backend as backend  # the fixture


async def test_body_delimited_by_connection_close_is_relayed_whole(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ")
        await writer.drain()
        writer.write(b"the end")
        writer.close()

    gateway = await start_gateway(await backend(health_then(answer)))
    async with http.get(f"{gateway.url}/v1/models") as response:
        assert response.status == 200
        assert await response.read() == b"until the end"


async def test_interim_100_continue_is_not_relayed(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
        )
        await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(health_then(answer)))
    async with http.post(f"{gateway.url}/v1/files", data=b"x") as response:
        assert response.status == 201
        assert await response.read() == b"ok"


async def test_backend_speaking_nonsense_is_a_502(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(health_then(answer)))
    async with http.post(f"{gateway.url}/v1/completions", json={}) as response:
        assert response.status == 502
        assert (await response.json())["error"]["code"] == "bad_gateway"


async def test_large_response_bodies_stream_through_intact(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    payload = bytes(range(256)) * (16 * 1024)  # 4 MiB

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload))
        for offset in range(0, len(payload), 100_000):
            writer.write(payload[offset : offset + 100_000])
            await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(health_then(answer)))
    async with http.get(f"{gateway.url}/v1/files/big") as response:
        digest = hashlib.sha256()
        async for chunk in response.content.iter_chunked(65536):
            digest.update(chunk)
            await asyncio.sleep(0)  # a slower reader than the backend: flow control engages
    assert digest.digest() == hashlib.sha256(payload).digest()


def _answer_first_then_drop(requests: list[bytes]) -> Handler:
    """Answer the first request on a connection, then read the next one and drop the connection
    without a word, as a backend crashing on it (or a keep-alive timeout racing it) does."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            requests.append(await read_request(reader))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            requests.append(await read_request(reader))
        writer.close()

    return handler


@pytest.mark.parametrize(
    ("method", "headers"),
    [
        ("GET", []),
        ("TRACE", []),
        ("OPTIONS", []),
        ("POST", [(b"idempotency-key", b"req-1")]),
        ("POST", [(b"x-idempotency-key", b"req-1")]),
    ],
)
async def test_a_replayable_request_the_backend_dropped_on_a_reused_connection_is_retried_once(
    backend: StartBackend, method: str, headers: list[tuple[bytes, bytes]]
) -> None:
    requests: list[bytes] = []
    pool = UpstreamPool(await backend(_answer_first_then_drop(requests)))
    try:
        for _ in range(3):
            async with pool.exchange(method, b"/v1/models", headers) as response:
                assert response.status == 200
                await response.read()
    finally:
        await pool.close()
    # first connection: 1 answered + 1 dropped, retried on the second: answered, and so on
    assert [head.split(b" ")[0].decode() for head in requests] == [method] * 5


async def test_a_post_the_backend_received_on_a_reused_connection_is_never_sent_twice(
    backend: StartBackend,
    start_gateway: StartGateway,
    http: aiohttp.ClientSession,
) -> None:
    """The POST was written whole, so the backend may have acted on it (then crashed): the
    client gets 502 and the backend sees it once, whatever the connection's history."""
    positions: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served = 0
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await read_request(reader)
                served += 1
                if head.startswith(b"POST /v1/crash "):
                    positions.append(served)
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        writer.close()

    gateway = await start_gateway(await backend(handler))
    async with http.post(f"{gateway.url}/v1/warm", json={}) as response:
        assert response.status == 200
    async with http.post(f"{gateway.url}/v1/crash", json={"prompt": "costly"}) as response:
        assert response.status == 502
        assert (await response.json())["error"]["code"] == "bad_gateway"
    assert len(positions) == 1
    assert positions[0] > 1, "the POST must have gone out on a reused connection"


async def test_a_non_idempotent_request_is_not_retried_at_the_pool(
    backend: StartBackend,
) -> None:
    requests: list[bytes] = []
    pool = UpstreamPool(await backend(_answer_first_then_drop(requests)))
    try:
        async with pool.exchange("POST", b"/v1/completions", [], b"{}") as response:
            assert await response.read() == b"ok"
        with pytest.raises(UpstreamClosed):
            async with pool.exchange("POST", b"/v1/completions", [], b"{}"):
                pass
    finally:
        await pool.close()
    assert len(requests) == 2


async def test_an_idle_connection_older_than_the_idle_limit_is_not_reused(
    backend: StartBackend,
) -> None:
    """Retired before a backend's own keep-alive timeout (uvicorn's is 5 s) can race a request."""
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await read_request(reader)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        writer.close()

    pool = UpstreamPool(await backend(handler), max_idle_seconds=0.2)
    try:
        for _ in range(2):
            async with pool.exchange("POST", b"/v1/completions", [], b"{}") as response:
                assert await response.read() == b"ok"
        assert connections == 1
        await asyncio.sleep(0.3)  # past the idle limit: that is the scenario, not a wait
        async with pool.exchange("POST", b"/v1/completions", [], b"{}") as response:
            assert await response.read() == b"ok"
    finally:
        await pool.close()
    assert connections == 2


async def test_keep_alive_connections_are_reused(
    backend: StartBackend,
) -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            while True:
                await read_request(reader)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    pool = UpstreamPool(await backend(handler))
    try:
        for _ in range(5):
            async with pool.exchange("GET", b"/x", []) as response:
                assert await response.read() == b"ok"
    finally:
        await pool.close()
    assert connections == 1


async def test_a_request_cancelled_while_waiting_for_the_head_stops_its_body_writer(
    backend: StartBackend,
) -> None:
    """A client leaving mid-upload cancels the exchange: the task streaming its body to the
    backend must end with it, not keep reading a request nobody will answer."""
    body_reached_backend = asyncio.Event()
    body_closed = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"first")
            body_reached_backend.set()
            await reader.read()
        writer.close()

    async def endless_body() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await asyncio.Event().wait()
            yield b"never"
        finally:
            body_closed.set()

    pool = UpstreamPool(await backend(silent))

    async def upload() -> None:
        async with pool.exchange("POST", b"/v1/files", [], endless_body()):
            pass

    task = asyncio.create_task(upload())
    try:
        await asyncio.wait_for(body_reached_backend.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert body_closed.is_set(), "the body writer outlived the cancelled exchange"
    finally:
        await pool.close()


async def test_the_backend_name_is_looked_up_once_while_its_address_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A held request's readiness is probed 20 times a second: each probe looking the Service's
    name up anew would be several DNS queries. A refused connection keeps the address (nothing
    listens there yet); any other failure looks the name up again."""
    loop = asyncio.get_running_loop()
    lookups: list[object] = []
    real_lookup, real_connect = loop.getaddrinfo, upstream_pool._sock_connect

    async def lookup(host: object, *args: object, **kwargs: object) -> object:
        lookups.append(host)
        return await real_lookup(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "getaddrinfo", lookup)
    server = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://localhost:{port}")
    try:
        for _ in range(3):
            (await pool._connect()).close()
        server.close()
        await server.wait_closed()
        for _ in range(2):
            with pytest.raises(ConnectionError):  # refused
                await pool._connect()
        assert lookups == [b"localhost"]  # bytes: no IDNA codec for an ASCII name

        async def unreachable(*args: object, **kwargs: object) -> object:
            raise OSError(113, "No route to host")

        monkeypatch.setattr(upstream_pool, "_sock_connect", unreachable)
        with pytest.raises(ConnectionError):
            await pool._connect()
        monkeypatch.setattr(upstream_pool, "_sock_connect", real_connect)
        with pytest.raises(ConnectionError):  # refused, after a fresh lookup
            await pool._connect()
        assert lookups == [b"localhost", b"localhost"]
    finally:
        await pool.close()


async def test_a_connection_attempt_whose_syn_is_lost_is_made_again_on_a_new_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel resends a SYN after a second, and on the same route: one lost while kube-proxy
    rewrote the Service's rules would hold a probe, or a request, for the whole connect timeout.
    An attempt unanswered for half a second is given up for a new one."""
    loop = asyncio.get_running_loop()
    attempts: list[object] = []
    real_connect = upstream_pool._sock_connect

    async def first_lost(loop: Any, sock: Any, address: Any) -> None:
        attempts.append(sock)
        if len(attempts) == 1:
            await asyncio.Event().wait()  # a SYN nobody answers
        await real_connect(loop, sock, address)

    monkeypatch.setattr(upstream_pool, "_sock_connect", first_lost)
    server = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", 0)
    pool = UpstreamPool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    try:
        started = loop.time()
        connection = await pool._connect()
        assert loop.time() - started < 1.5, "not the 30 s connect timeout"
        assert len(attempts) == 2
        assert attempts[0] is not attempts[1]
        connection.close()
    finally:
        server.close()
        await pool.close()


async def test_body_pieces_that_arrived_while_the_reader_was_away_come_as_one() -> None:
    """A relay that fell behind its backend catches up in one write to its client."""

    class Transport:
        def write(self, data: bytes) -> None:
            pass

        def close(self) -> None:
            pass

    connection = Http1Connection(read_timeout=60, head_timeout=10)
    connection.connection_made(Transport())  # type: ignore[arg-type]
    connection.begin(head_request=False)
    connection.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    await connection.read_head()
    connection.data_received(b"3\r\none\r\n")
    connection.data_received(b"3\r\ntwo\r\n")
    assert await connection.read_chunk() == b"onetwo"
    reading = asyncio.ensure_future(connection.read_chunk())
    await asyncio.sleep(0)
    connection.data_received(b"5\r\nthree\r\n0\r\n\r\n")
    assert await reading == b"three"
    assert await connection.read_chunk() == b""
    connection.release()


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_connecting_to_an_ascii_backend_loads_no_idna_codec(host: str, loop: str) -> None:
    """The codec (with `stringprep` and `unicodedata`) is 0.4 MiB of a gateway's memory, and
    the lookup of a name given as text loads it; so does uvloop's `sock_connect`, for an
    address too. One connection is refused, one accepted, on either event loop."""
    code = (
        "import asyncio, socket, sys\n"
        "from noctaya.gateway.upstream import UpstreamPool\n"
        "async def main():\n"
        "    try:\n"
        f"        await UpstreamPool('http://{host}:9', connect_timeout=2.0)._connect()\n"
        "    except ConnectionError:\n"
        "        pass\n"
        "    with socket.create_server(('127.0.0.1', 0)) as server:\n"
        "        port = server.getsockname()[1]\n"
        f"        pool = UpstreamPool(f'http://{host}:{{port}}', connect_timeout=2.0)\n"
        "        (await pool._connect()).close()\n"
        f"asyncio.run(main()) if '{loop}' == 'asyncio' else __import__('uvloop').run(main())\n"
        "print('encodings.idna' in sys.modules, 'unicodedata' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == ["False", "False"]
