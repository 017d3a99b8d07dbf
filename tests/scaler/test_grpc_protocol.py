"""The scaler's gRPC wire protocol, as served by hypercorn's HTTP/2 instead of grpcio's server.

KEDA's Go client reads every answer as a gRPC status with a message, so these tests drive the
scaler over real sockets on 127.0.0.1, with a real grpcio client where one can say what is
meant and with hand-made HTTP/2 frames where no library client would send them: what a non-gRPC
request gets, compressed requests, the framing refusals, the percent-encoded grpc-message, the
cap on concurrent calls, TCP keepalive on accepted connections, and unknown methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import socket
import stat
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import grpc
import h2.errors
import h2.events
import httpx
import pytest
from gateway.h2_client import RawH2
from gateway.support import eventually
from noctaya.gateway.scaler.grpc_app import MAX_CONCURRENT_CALLS
from noctaya.gateway.scaler.grpc_framing import MAX_MESSAGE_BYTES
from noctaya.gateway.scaler.server import (
    KEEPALIVE_IDLE_SECONDS,
    KEEPALIVE_INTERVAL_SECONDS,
    KEEPALIVE_PROBES,
    MAX_STREAMS_PER_CONNECTION,
)
from noctaya.local.externalscaler import externalscaler_pb2 as pb

from .conftest import Scaler
from .keda import STEP_TIMEOUT, Keda, ref

SERVICE = "externalscaler.ExternalScaler"
IS_ACTIVE = f"/{SERVICE}/IsActive"
REF = ref().SerializeToString()


def grpc_headers(
    path: str = IS_ACTIVE, *extra: tuple[str, str], content_type: str | None = "application/grpc"
) -> list[tuple[str, str]]:
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "127.0.0.1"),
    ]
    if content_type is not None:
        headers.append(("content-type", content_type))
    return [*headers, ("te", "trailers"), *extra]


def framed(message: bytes, compressed: int = 0, declared: int | None = None) -> bytes:
    """One length-prefixed gRPC message; `declared` overrides the length in its prefix."""
    length = len(message) if declared is None else declared
    return bytes([compressed]) + length.to_bytes(4, "big") + message


def deflated(data: bytes, wbits: int) -> bytes:
    compressor = zlib.compressobj(wbits=wbits)
    return compressor.compress(data) + compressor.flush()


@dataclass
class GrpcH2(RawH2):
    """RawH2 that also keeps each stream's response headers and trailers, where gRPC puts its
    status."""

    headers: dict[int, dict[bytes, bytes]] = field(default_factory=dict)
    trailers: dict[int, dict[bytes, bytes]] = field(default_factory=dict)

    @classmethod
    async def connect(cls, port: int) -> GrpcH2:
        client = await cls.open(port)
        assert isinstance(client, GrpcH2)
        return client

    def _record(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self.headers[event.stream_id] = dict(event.headers)
        elif isinstance(event, h2.events.TrailersReceived):
            self.trailers[event.stream_id] = dict(event.headers)
        super()._record(event)

    def open_stream(self, stream_id: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """A request whose body never ends (no END_STREAM), as a stalled or hostile client."""
        self.connection.send_headers(stream_id, headers, end_stream=False)
        if body:
            self.connection.send_data(stream_id, body, end_stream=False)
        self.flush()

    async def hang_up(self) -> None:
        """Half-close, then read until the server closes: by then it has let go of every call
        on the connection, so a server stopped next finds none still waiting for its body."""
        if not self.writer.is_closing():
            with contextlib.suppress(OSError):
                self.writer.write_eof()
        if not self.closed:
            await self.until_closed()
        self.close()

    async def status(self, stream_id: int) -> tuple[int, str]:
        """(grpc-status, raw grpc-message) of a finished call that was answered with a 200."""
        reply = await self.response(stream_id)
        assert reply.reset is None, f"stream reset with {reply.reset}"
        assert reply.status == b"200"
        assert self.headers[stream_id][b"content-type"] == b"application/grpc"
        assert b"grpc-status" not in self.headers[stream_id], "the status is in the trailers"
        trailers = self.trailers[stream_id]
        return int(trailers[b"grpc-status"]), trailers.get(b"grpc-message", b"").decode("ascii")


@pytest.fixture
async def raw(scaler: Scaler) -> AsyncIterator[GrpcH2]:
    client = await GrpcH2.connect(scaler.server.port)
    yield client
    await client.hang_up()


async def test_a_raw_call_gets_its_reply_message_and_ok_trailers(
    scaler: Scaler, raw: GrpcH2
) -> None:
    """The baseline every refusal below differs from: reply framed, status in trailers."""
    scaler.feed.publish(1)
    raw.request(1, grpc_headers(), framed(REF))
    assert await raw.status(1) == (0, "")
    assert b"grpc-message" not in raw.trailers[1], "no message on success"
    body = raw.replies[1].body
    assert body[:1] == b"\x00", "an uncompressed reply"
    assert int.from_bytes(body[1:5], "big") == len(body) - 5
    assert pb.IsActiveResponse.FromString(body[5:]).result is True


async def test_a_request_message_split_over_many_data_frames_is_reassembled(
    scaler: Scaler, raw: GrpcH2
) -> None:
    """HTTP/2 may cut a message anywhere, even inside its 5-byte prefix."""
    scaler.feed.publish(1)
    raw.connection.send_headers(1, grpc_headers(), end_stream=False)
    message = framed(REF)
    for index in range(len(message)):
        raw.connection.send_data(1, message[index : index + 1], end_stream=False)
    raw.connection.end_stream(1)
    raw.flush()
    assert await raw.status(1) == (0, "")
    assert pb.IsActiveResponse.FromString(raw.replies[1].body[5:]).result is True


@pytest.mark.parametrize(
    "content_type", ["application/grpc+proto", "application/grpc; charset=utf-8"]
)
async def test_a_grpc_content_type_with_a_subtype_is_served(
    scaler: Scaler, raw: GrpcH2, content_type: str
) -> None:
    """grpc-go clients may send application/grpc+proto; it is gRPC all the same."""
    scaler.feed.publish(1)
    raw.request(1, grpc_headers(content_type=content_type), framed(REF))
    assert await raw.status(1) == (0, "")


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_http1_requests_get_505_saying_grpc_needs_http2(scaler: Scaler, method: str) -> None:
    """A gRPC client misconfigured for HTTP/1.1 must be told why, as gRPC servers answer."""
    async with httpx.AsyncClient(http1=True, http2=False, timeout=STEP_TIMEOUT) as client:
        response = await client.request(
            method,
            f"http://127.0.0.1:{scaler.server.port}{IS_ACTIVE}",
            headers={"content-type": "application/grpc"},
            content=framed(REF) if method == "POST" else None,
        )
    assert response.http_version == "HTTP/1.1"
    assert response.status_code == 505
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == "gRPC requires HTTP/2\n"


async def test_h2_get_gets_405(raw: GrpcH2) -> None:
    """gRPC is POST only; anything else is no call and gets an HTTP status, not a gRPC one."""
    headers = [(":method", "GET"), *grpc_headers()[1:]]
    raw.request(1, headers)
    reply = await raw.response(1)
    assert reply.status == b"405"
    assert reply.body == b"gRPC requires POST\n"
    assert 1 not in raw.trailers


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [
        ("application/json", "application/json"),
        (None, ""),
        ("text/grpc", "text/grpc"),
        ("application/grpcfoo", "application/grpcfoo"),
    ],
)
async def test_h2_post_of_another_content_type_gets_415_naming_it(
    raw: GrpcH2, content_type: str | None, shown: str
) -> None:
    """The client sees which content type was refused, as grpc-go's server words it."""
    raw.request(1, grpc_headers(content_type=content_type), framed(REF))
    reply = await raw.response(1)
    assert reply.status == b"415"
    assert reply.body == f'invalid gRPC request content-type "{shown}"\n'.encode()
    assert raw.headers[1][b"content-type"] == b"text/plain; charset=utf-8"
    assert 1 not in raw.trailers


@pytest.mark.parametrize(
    "compression", [grpc.Compression.Deflate, grpc.Compression.Gzip], ids=["deflate", "gzip"]
)
async def test_grpcio_compressed_requests_are_answered(
    scaler: Scaler, keda: Keda, compression: grpc.Compression
) -> None:
    """A client configured for compression must be served, not refused. The padding makes the
    message compressible, so grpcio really sends it compressed (it sends a message that does not
    shrink as it is)."""
    scaler.feed.publish(1)
    padded = ref({"targetValue": "1", "padding": "x" * 4000})
    reply = await keda.stub.IsActive(padded, timeout=STEP_TIMEOUT, compression=compression)
    assert reply.result is True
    request = pb.GetMetricsRequest(scaledObjectRef=padded, metricName="pending")
    metrics = await keda.stub.GetMetrics(request, timeout=STEP_TIMEOUT, compression=compression)
    assert metrics.metricValues[0].metricValueFloat == 1


@pytest.mark.parametrize(
    ("encoding", "wbits"), [("gzip", 31), ("deflate", 15)], ids=["gzip", "deflate"]
)
async def test_raw_compressed_messages_are_inflated(
    scaler: Scaler, raw: GrpcH2, encoding: str, wbits: int
) -> None:
    """Each grpc-encoding is inflated with its own zlib format (gzip wrapper vs zlib's)."""
    scaler.feed.publish(1)
    body = framed(deflated(REF, wbits), compressed=1)
    raw.request(1, grpc_headers(IS_ACTIVE, ("grpc-encoding", encoding)), body)
    assert await raw.status(1) == (0, "")
    assert pb.IsActiveResponse.FromString(raw.replies[1].body[5:]).result is True


@dataclass(frozen=True)
class Refusal:
    extra: tuple[tuple[str, str], ...]
    body: bytes
    code: int
    message: Callable[[str], bool]


GZIP_REF = deflated(REF, 31)
REFUSALS = {
    "unknown-encoding": Refusal(
        (("grpc-encoding", "snappy"),),
        framed(REF),
        12,
        lambda m: m == 'grpc: Decompressor is not installed for grpc-encoding "snappy"',
    ),
    "compressed-flag-without-encoding": Refusal(
        (),
        framed(GZIP_REF, compressed=1),
        13,
        lambda m: m == "grpc: compressed flag set with identity or empty encoding",
    ),
    "compressed-flag-with-identity": Refusal(
        (("grpc-encoding", "identity"),),
        framed(GZIP_REF, compressed=1),
        13,
        lambda m: m == "grpc: compressed flag set with identity or empty encoding",
    ),
    "two-messages": Refusal(
        (),
        framed(REF) + framed(REF),
        3,
        lambda m: m == "malformed request: more than one request message",
    ),
    "body-shorter-than-declared": Refusal(
        (),
        framed(REF, declared=len(REF) + 10),
        3,
        lambda m: (
            m == f"malformed request: message of {len(REF) + 10} bytes ended after {len(REF)}"
        ),
    ),
    "no-message": Refusal((), b"", 3, lambda m: m == "malformed request: no request message"),
    "truncated-prefix": Refusal(
        (), b"\x00\x00\x00", 3, lambda m: m == "malformed request: truncated message prefix"
    ),
    "invalid-compressed-flag": Refusal(
        (),
        framed(REF, compressed=2),
        3,
        lambda m: m == "malformed request: invalid compressed flag 2",
    ),
    "corrupt-gzip": Refusal(
        (("grpc-encoding", "gzip"),),
        framed(b"not gzip at all", compressed=1),
        3,
        lambda m: m.startswith("malformed request: invalid gzip data: "),
    ),
    "gzip-with-trailing-bytes": Refusal(
        (("grpc-encoding", "gzip"),),
        framed(GZIP_REF + b"junk", compressed=1),
        3,
        lambda m: m == "malformed request: invalid gzip data: not one whole stream",
    ),
    "truncated-gzip": Refusal(
        (("grpc-encoding", "gzip"),),
        framed(GZIP_REF[:-4], compressed=1),
        3,
        lambda m: m == "malformed request: invalid gzip data: not one whole stream",
    ),
}


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
async def test_request_bytes_that_are_not_one_message_end_the_call_with_a_status(
    scaler: Scaler, raw: GrpcH2, refusal: Refusal
) -> None:
    """Each framing fault is answered as a gRPC status KEDA can show, and the connection goes
    on serving calls."""
    scaler.feed.publish(1)
    raw.request(1, grpc_headers(IS_ACTIVE, *refusal.extra), refusal.body)
    code, message = await raw.status(1)
    assert code == refusal.code
    assert refusal.message(message), message
    assert raw.replies[1].body == b"", "no reply message with a refusal"
    raw.request(3, grpc_headers(), framed(REF))
    assert await raw.status(3) == (0, "")


async def test_a_message_declared_over_the_bound_is_refused_before_its_body_arrives(
    raw: GrpcH2,
) -> None:
    """The 5-byte prefix suffices: the scaler never buffers toward a message it will refuse."""
    declared = 1024 * 1024
    raw.open_stream(1, grpc_headers(), framed(b"", declared=declared))
    code, message = await raw.status(1)
    assert code == 8
    assert message == f"grpc: received message larger than max ({declared} vs. {MAX_MESSAGE_BYTES})"


async def test_a_second_message_is_refused_before_the_body_ends(raw: GrpcH2) -> None:
    """A client that keeps its body open after two messages is answered, not waited on."""
    raw.open_stream(1, grpc_headers(), framed(REF) + framed(REF))
    assert await raw.status(1) == (3, "malformed request: more than one request message")


async def test_grpc_message_is_percent_encoded_and_grpcio_decodes_it(
    keda: Keda, raw: GrpcH2
) -> None:
    """A header value cannot carry UTF-8 or stray `%`: the raw trailer is ASCII with %XX escapes,
    and a real client shows the server's text unchanged."""
    metadata = {"targetValue": "é%"}
    text = 'targetValue "é%" must be a positive number'
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await keda.is_active(metadata)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == text

    raw.request(1, grpc_headers(), framed(ref(metadata).SerializeToString()))
    await raw.response(1)
    encoded = raw.trailers[1][b"grpc-message"]
    assert encoded == b'targetValue "%C3%A9%25" must be a positive number'
    assert encoded.isascii()
    assert int(raw.trailers[1][b"grpc-status"]) == 3


async def test_unknown_service_is_unimplemented_naming_it(keda: Keda) -> None:
    """A client pointed at the wrong service learns which one it asked for."""
    call = keda.channel.unary_unary("/other.Service/IsActive")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(REF, timeout=STEP_TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert raised.value.details() == "unknown service other.Service"


async def test_unknown_method_is_unimplemented_naming_method_and_service(keda: Keda) -> None:
    """A KEDA newer than the scaler's proto learns which method is missing."""
    call = keda.channel.unary_unary(f"/{SERVICE}/IsReallyActive")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call(REF, timeout=STEP_TIMEOUT)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert raised.value.details() == f"unknown method IsReallyActive for service {SERVICE}"


async def test_a_path_without_a_method_is_unimplemented_naming_the_path(raw: GrpcH2) -> None:
    """A path with no service/method split still gets a status, not a crash."""
    raw.request(1, grpc_headers("/nonsense"), framed(REF))
    assert await raw.status(1) == (12, "unknown service /nonsense")


async def _advertised_stream_cap(client: GrpcH2) -> None:
    def settled() -> bool:
        cap = client.connection.remote_settings.max_concurrent_streams
        return bool(cap == MAX_STREAMS_PER_CONNECTION)

    await client.until(settled)


async def test_calls_past_the_concurrent_call_cap_are_refused_until_slots_free(
    scaler: Scaler, keda: Keda
) -> None:
    """Calls whose bodies never end hold a slot each; past MAX_CONCURRENT_CALLS a call is refused
    with RESOURCE_EXHAUSTED (not queued, not a broken stream), and slots come back as soon as
    the holders' streams or connections go."""
    scaler.feed.publish(1)
    port = scaler.server.port
    holders = [
        await GrpcH2.connect(port)
        for _ in range(MAX_CONCURRENT_CALLS // MAX_STREAMS_PER_CONNECTION)
    ]
    probe = await GrpcH2.connect(port)
    stream_ids = itertools.count(1, 2)

    async def probe_call() -> tuple[int, str]:
        stream_id = next(stream_ids)
        probe.request(stream_id, grpc_headers(), framed(REF))
        return await probe.status(stream_id)

    try:
        for holder in holders:
            await _advertised_stream_cap(holder)
            for index in range(MAX_STREAMS_PER_CONNECTION):
                holder.open_stream(1 + 2 * index, grpc_headers(), b"")
            await holder.barrier()
        assert await probe_call() == (8, "too many concurrent calls")
        for holder in holders:
            await holder.barrier()
            assert not holder.replies, "held calls are neither answered nor reset"

        # One held stream reset frees its slot: exactly MAX_CONCURRENT_CALLS calls may run.
        holders[0].connection.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
        await holders[0].barrier()
        assert await probe_call() == (0, "")
        # Taken again by a call held on the probe's own connection: refused once more.
        probe.open_stream(next(stream_ids), grpc_headers(), b"")
        assert await probe_call() == (8, "too many concurrent calls")
    finally:
        for client in [*holders, probe]:
            await client.hang_up()

    async def served() -> bool:
        try:
            return await keda.is_active()
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            return False

    await eventually(served, within=10, what="IsActive once the holders' connections closed")


_KEEPALIVE_TIMER = re.compile(
    r"timer:\(keepalive,(?:(?P<min>\d+)min)?(?:(?P<sec>\d+)(?:sec|\.(?P<frac>\d+)ms))?"
    r"(?:(?P<ms>\d+)ms)?,(?P<probes>\d+)\)"
)


def _seconds(match: re.Match[str]) -> float:
    """ss's timer text (`59sec`, `1min`, `9.512ms` for 9.512 s) in seconds."""
    minutes = int(match["min"] or 0)
    seconds = int(match["sec"] or 0)
    millis = int(match["frac"] or match["ms"] or 0)
    return minutes * 60 + seconds + millis / 1000


async def _ss(server_port: int, client_port: int) -> str:
    process = await asyncio.create_subprocess_exec(
        "/usr/bin/ss",
        "-tnoH",
        "state",
        "established",
        f"( sport = :{server_port} and dport = :{client_port} )",
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(STEP_TIMEOUT):
        out, _ = await process.communicate()
    assert process.returncode == 0
    return out.decode()


def _accepted_socket_options(server_port: int, client_port: int) -> tuple[int, int, int, int]:
    """SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT of the server's end of the
    connection, found among this process's descriptors (the scaler runs in-process)."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with sock:
            if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
                continue
            try:
                local, peer = sock.getsockname(), sock.getpeername()
            except OSError:
                continue
            if local[1] == server_port and peer[1] == client_port:
                return (
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                )
    raise AssertionError(f"no accepted socket 127.0.0.1:{server_port} <- :{client_port}")


async def test_accepted_connections_have_tcp_keepalive_with_the_configured_timing(
    scaler: Scaler, raw: GrpcH2
) -> None:
    """A KEDA pod that vanishes without a FIN must be noticed (its stream and the gauge
    released) in about 80 s, not Linux's default two hours."""
    scaler.feed.publish(1)
    raw.request(1, grpc_headers(), framed(REF))
    assert await raw.status(1) == (0, "")
    client_port: int = raw.writer.get_extra_info("sockname")[1]
    port = scaler.server.port

    assert _accepted_socket_options(port, client_port) == (
        1,
        KEEPALIVE_IDLE_SECONDS,
        KEEPALIVE_INTERVAL_SECONDS,
        KEEPALIVE_PROBES,
    )

    shown = ""

    async def keepalive_timer() -> bool:
        nonlocal shown
        shown = await _ss(port, client_port)
        return "timer:(keepalive," in shown

    await eventually(keepalive_timer, within=STEP_TIMEOUT, what="a keepalive timer in ss")
    match = _KEEPALIVE_TIMER.search(shown)
    assert match is not None, shown
    remaining = _seconds(match)
    assert KEEPALIVE_IDLE_SECONDS - STEP_TIMEOUT < remaining <= KEEPALIVE_IDLE_SECONDS, shown
    assert match["probes"] == "0", "no probe sent on a live connection"


async def test_stop_ends_a_call_whose_request_body_never_ends_within_its_grace(
    scaler: Scaler, raw: GrpcH2
) -> None:
    """A client stalled (or gone) mid-request must not hold up the stop: hypercorn ended the call
    it cancelled with a 500 that waited for ever on the HTTP/2 send task cancelled with it."""
    raw.open_stream(1, grpc_headers(), framed(REF)[:3])
    await raw.barrier()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(scaler.server.stop(1), 10)
    assert loop.time() - started < 5
