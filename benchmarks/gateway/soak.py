"""Soak: abusive clients against a real gateway and aggregator, well-formed traffic alongside.

    .venv/bin/python -m benchmarks.gateway.soak [--seconds 60]

Loopback only, and it stops by itself: every client checks the deadline and every wait has a
timeout. It starts the engine stub, a gateway in front of it (serving the ExternalScaler on gRPC)
and a demand aggregator, then mixes slow HTTP/1.1 bodies and heads, HTTP/2 clients that never
open their flow-control window, HTTP/2 requests with invalid headers, SETTINGS floods, rapid
resets, Content-Length + Transfer-Encoding smuggling, CONNECT, WebSocket upgrades, hostile demand
reports and undecodable gRPC with well-formed chat completions (whole and streamed), demand
reports and KEDA calls. It prints what each client got, the well-formed outcomes, the gateway's
RSS (start, peak, end), the client connections it still holds and `noctaya_gateway_pending` once
all clients are gone, and whether either log holds a traceback. Exit status 1 when any of those
is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import SettingsFrame
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

from benchmarks.gateway import procs

CHAT = "/v1/chat/completions"
CHAT_BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "hi"}]})
STREAM_BODY = json.dumps(
    {"model": "stub", "messages": [{"role": "user", "content": "hi"}], "stream": True}
)
TOKEN = "k" * 43
SCALER = "/externalscaler.ExternalScaler/"
KEDA_REF = pb.ScaledObjectRef(name="soak", namespace="default", scalerMetadata={"targetValue": "1"})
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STEP = 5.0  # the longest any single wait may take
SETTLE = 15.0  # after the clients stop: time for the gateway to drop what they left behind
GROUPS = ("slow", "h2-window", "h2-headers", "h2-settings", "h2-reset", "http1", "reports", "grpc")
PACE = 0.01  # between cheap abusive requests, so they leave the two cores some room for the rest


@dataclass
class Tally:
    """What every client got: per client, a count per outcome."""

    outcomes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, client: str, outcome: str) -> None:
        self.outcomes[client][outcome] += 1


@dataclass(frozen=True)
class Targets:
    gateway: int
    gateway_scaler: int
    aggregator: int
    aggregator_scaler: int
    deadline: float


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway.soak")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated abuser groups of {', '.join(GROUPS)} (none: well-formed only)",
    )
    args = parser.parse_args()
    only = frozenset(filter(None, args.only.split(",")))
    unknown = only - {*GROUPS, "none"}
    if unknown:
        parser.error(f"--only: unknown groups {', '.join(sorted(unknown))}")
    logs = Path(tempfile.mkdtemp(prefix="noctaya-soak-"))
    token = logs / "token"
    token.write_text(TOKEN)
    engine = procs.engine(STUB_TOKEN_DELAY="5ms")
    scaler_port = procs.free_port()
    gateway = procs.gateway(
        engine.url,
        log=logs / "gateway.log",
        NOCTAYA_SCALER_LISTEN_ADDR=f"127.0.0.1:{scaler_port}",
    )
    aggregator_port, aggregator_scaler_port = procs.free_port(), procs.free_port()
    aggregator = procs.launch(
        [str(procs.BIN / "noctaya-gateway"), "--mode=aggregator"],
        {
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token),
            "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{aggregator_port}",
            "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{aggregator_scaler_port}",
        },
        f"http://127.0.0.1:{aggregator_port}",
        "/readyz",
        logs / "aggregator.log",
    )
    try:
        ports = (gateway, scaler_port, aggregator_port, aggregator_scaler_port)
        return asyncio.run(_soak(*ports, args.seconds, only, logs))
    finally:
        for process in (gateway, aggregator, engine):
            process.stop()


async def _soak(
    gateway: procs.Process,
    scaler_port: int,
    aggregator_port: int,
    aggregator_scaler_port: int,
    seconds: float,
    only: frozenset[str],
    logs: Path,
) -> int:
    gateway_port = int(gateway.url.rsplit(":", 1)[1])
    loop = asyncio.get_running_loop()
    targets = Targets(
        gateway_port, scaler_port, aggregator_port, aggregator_scaler_port, loop.time() + seconds
    )
    tally, good = Tally(), Tally()
    rss_start = gateway.rss_mib()
    rss_peak = [rss_start]
    clients: list[Awaitable[None]] = [
        *(_good_chat(targets, good, stream=n % 2 == 1) for n in range(6)),
        _good_reports(targets, good),
        _good_keda(targets, good),
    ]
    for name, abusers in _abusers(targets, tally).items():
        if not only or name in only:
            clients += abusers()
    sampler = asyncio.ensure_future(_sample_rss(gateway, rss_peak))
    tasks = [asyncio.ensure_future(client) for client in clients]
    _, late = await asyncio.wait(tasks, timeout=seconds + 2 * STEP + 5)
    for task in late:
        task.cancel()
    await asyncio.wait(tasks)
    crashed = [task for task in tasks if not task.cancelled() and task.exception() is not None]
    sampler.cancel()
    if gateway.popen.poll() is not None:
        print(f"the gateway exited during the soak (status {gateway.popen.returncode})")
        print((logs / "gateway.log").read_text(errors="replace")[-4000:])
        return 1
    pending = await _settled_pending(gateway.url, loop.time() + SETTLE)
    rss = (rss_start, max(rss_peak), gateway.rss_mib())
    return _report(tally, good, rss, _client_connections(gateway), pending, late, crashed, logs)


# Well-formed traffic: every one of these must succeed.


async def _good_chat(targets: Targets, good: Tally, *, stream: bool) -> None:
    kind = "chat stream" if stream else "chat"
    url = f"http://127.0.0.1:{targets.gateway}{CHAT}?tokens={20 if stream else 1}"
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while _running(targets):
            try:
                async with session.post(
                    url,
                    data=STREAM_BODY if stream else CHAT_BODY,
                    headers={"content-type": "application/json"},
                ) as reply:
                    body = await reply.read()
                complete = body.rstrip().endswith(b"data: [DONE]") if stream else b"choices" in body
                good.add(kind, "ok" if reply.status == 200 and complete else f"HTTP {reply.status}")
            except (aiohttp.ClientError, TimeoutError) as error:
                good.add(kind, f"failed: {type(error).__name__}")
            await asyncio.sleep(0.02)


async def _good_reports(targets: Targets, good: Tally) -> None:
    """A well-formed gateway reporting to the aggregator; KEDA must see exactly its demand."""
    url = f"http://127.0.0.1:{targets.aggregator}/v1/demand"
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=STEP)) as session,
        grpc.aio.insecure_channel(f"127.0.0.1:{targets.aggregator_scaler}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        sequence = 0
        while _running(targets):
            sequence += 1
            demand = sequence % 3
            report = {"memberID": "soak/good", "sequence": sequence, "demand": demand}
            try:
                async with session.post(url, json=report, headers=headers) as reply:
                    good.add(
                        "demand report", "ok" if reply.status == 204 else f"HTTP {reply.status}"
                    )
                request = pb.GetMetricsRequest(scaledObjectRef=KEDA_REF, metricName="pending")
                metrics = await stub.GetMetrics(request, timeout=STEP)
                seen = metrics.metricValues[0].metricValueFloat
                good.add("aggregate metric", "ok" if seen == demand else f"saw {seen}")
            except (aiohttp.ClientError, TimeoutError, grpc.aio.AioRpcError) as error:
                good.add("demand report", f"failed: {_describe(error)}")
            await asyncio.sleep(0.1)


async def _good_keda(targets: Targets, good: Tally) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{targets.gateway_scaler}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        while _running(targets):
            try:
                await stub.IsActive(KEDA_REF, timeout=STEP)
                good.add("gateway IsActive", "ok")
            except grpc.aio.AioRpcError as error:
                good.add("gateway IsActive", f"failed: {_describe(error)}")
            await asyncio.sleep(0.2)


# Abusive HTTP/1.1 clients.


SLOW_BODY = (
    f"POST {CHAT} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
    "Content-Length: 60000\r\n\r\n"
).encode()
SLOW_REPORT = (
    f"POST /v1/demand HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer {TOKEN}\r\n"
    "Content-Length: 60000\r\n\r\n"
).encode()
SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: soak\r\nX-A: "


async def _trickle(port: int, targets: Targets, tally: Tally, kind: str, prefix: bytes) -> None:
    """Send `prefix`, then one byte every 0.5 s until the server answers or gives up."""
    loop = asyncio.get_running_loop()
    while _running(targets):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            tally.add(kind, "connect failed")
            await asyncio.sleep(0.5)
            continue
        started = loop.time()
        writer.write(prefix)
        answer: bytes | None = None
        try:
            while _running(targets) and answer is None:
                writer.write(b"a")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    answer = await asyncio.wait_for(reader.read(1024), 0.5)
            if answer is None:
                outcome = "still open when the soak ended"
            else:
                outcome = _status_of(answer) if answer else "closed"
            tally.add(kind, f"{outcome} after {_bucket(loop.time() - started)}")
        except (OSError, ConnectionError):
            tally.add(kind, f"reset after {_bucket(loop.time() - started)}")
        finally:
            writer.close()


async def _http1_oddities(targets: Targets, tally: Tally) -> None:
    """Smuggling-shaped framing, CONNECT and WebSocket upgrades, one after another."""
    requests = {
        "CL+TE smuggling": (
            f"POST {CHAT} HTTP/1.1\r\nHost: soak\r\nContent-Length: 6\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"
        ),
        "TE+CL smuggling": (
            f"POST {CHAT} HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n"
            "Content-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n"
        ),
        "obfuscated TE": (
            f"POST {CHAT} HTTP/1.1\r\nHost: soak\r\nContent-Length: 4\r\n"
            "Transfer-Encoding: xchunked\r\n\r\n1\r\nZ\r\n0\r\n\r\n"
        ),
        "CONNECT": "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n",
        "websocket upgrade": (
            f"GET {CHAT} HTTP/1.1\r\nHost: soak\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        ),
        "h2c upgrade": (
            "GET /healthz HTTP/1.1\r\nHost: soak\r\nConnection: Upgrade, HTTP2-Settings\r\n"
            "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
        ),
    }
    while _running(targets):
        for kind, request in requests.items():
            tally.add(kind, await _first_answer(targets.gateway, request.encode()))


async def _hostile_reports(targets: Targets, tally: Tally) -> None:
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    bodies = [
        b'{"memberID":"\\ud800","sequence":1,"demand":1}',
        b'{"memberID":"a","memberID":"b","sequence":1,"demand":1}',
        b'{"memberID":"a","sequence":1,"demand":NaN}',
        b'{"memberID":"a","sequence":1e999,"demand":1}',
        b'{"memberID":"a","sequence":1,"demand":' + b"9" * 4000 + b"}",
        b'{"memberID":' + b"[" * 20000 + b"]" * 20000 + b"}",
        b'{"memberID":"\xff\xfe","sequence":1,"demand":1}',
        b'{"memberID":["a"],"sequence":"1","demand":{}}',
        os.urandom(512),
    ]
    heads = [
        f"POST /v1/demand HTTP/1.1\r\nHost: soak\r\n{auth}Connection: close\r\n",
        f"POST /v1/demand HTTP/1.0\r\n{auth}",
        "POST /v1/demand HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer wrong\r\n",
    ]
    n = 0
    while _running(targets):
        n += 1
        body = bodies[n % len(bodies)]
        head = heads[n % len(heads)].encode()
        request = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        tally.add("hostile report", await _first_answer(targets.aggregator, request))
        await asyncio.sleep(PACE)
        if n % 10 == 0:
            smuggle = head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            tally.add("hostile report CL+TE", await _first_answer(targets.aggregator, smuggle))


# Abusive HTTP/2 clients (prior knowledge, cleartext).


class H2Client:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, validate: bool
    ) -> None:
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=validate,
            normalize_outbound_headers=validate,
            validate_inbound_headers=False,
        )
        self.conn = h2.connection.H2Connection(config)
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, *, validate: bool = True, window: int | None = None) -> H2Client:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), STEP)
        client = cls(reader, writer, validate)
        client.conn.initiate_connection()
        if window is not None:
            client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        client.flush()
        return client

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    async def events(self, within: float) -> list[h2.events.Event]:
        """What arrives within `within` s; a closed connection is a ConnectionTerminated."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), within)
        except TimeoutError:
            return []
        if not data:
            return [h2.events.ConnectionTerminated()]
        events = self.conn.receive_data(data)
        self.flush()
        return events

    def request(self, path: str, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> int:
        stream = self.conn.get_next_available_stream_id()
        headers = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":authority", b"soak"),
            (b":path", path.encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *extra,
        ]
        self.conn.send_headers(stream, headers)
        self.conn.send_data(stream, body, end_stream=True)
        return stream

    def close(self) -> None:
        self.writer.close()


async def _h2_closed_window(targets: Targets, tally: Tally) -> None:
    """Streams whose window is never opened: the gateway can send their heads, never a token."""
    while _running(targets):
        try:
            client = await H2Client.open(targets.gateway, window=0)
            for _ in range(50):
                client.request(f"{CHAT}?tokens=500", STREAM_BODY.encode())
            client.flush()
            heads = 0
            until = asyncio.get_running_loop().time() + STEP
            while _running(targets) and asyncio.get_running_loop().time() < until:
                events = await client.events(0.5)
                heads += sum(isinstance(event, h2.events.ResponseReceived) for event in events)
                if any(isinstance(event, h2.events.ConnectionTerminated) for event in events):
                    break
            tally.add("h2 closed window", f"{heads} heads of 50 in {STEP:g}s")
            client.close()
        except (OSError, TimeoutError, h2.exceptions.ProtocolError) as error:
            tally.add("h2 closed window", f"failed: {_describe(error)}")


async def _h2_bad_headers(targets: Targets, tally: Tally) -> None:
    body = CHAT_BODY.encode()
    bad: dict[str, list[tuple[bytes, bytes]]] = {
        "uppercase name": [(b"X-Upper", b"1")],
        "connection header": [(b"connection", b"keep-alive")],
        "te: gzip": [(b"te", b"gzip")],
        "newline in value": [(b"x-split", b"a\r\nx-injected: 1")],
        "pseudo after regular": [(b":method", b"GET")],
        "empty name": [(b"", b"1")],
        "space in name": [(b"x bad", b"1")],
        "wrong content-length": [(b"content-length", b"999")],
    }
    while _running(targets):
        for kind, extra in bad.items():
            try:
                client = await H2Client.open(targets.gateway, validate=False)
                stream = client.request(CHAT, body, extra)
                client.flush()
                outcome = "no answer"
                for _ in range(int(STEP / 0.5)):
                    found = _stream_outcome(await client.events(0.5), stream)
                    if found:
                        outcome = found
                        break
                tally.add(f"h2 {kind}", outcome)
                client.close()
            except (OSError, TimeoutError, h2.exceptions.ProtocolError) as error:
                tally.add(f"h2 {kind}", f"failed: {_describe(error)}")


async def _h2_settings_flood(targets: Targets, tally: Tally) -> None:
    """Thousands of SETTINGS frames without reading a single ACK, then see what came back."""
    flood = PREFACE + SettingsFrame(0).serialize()
    flood += (
        SettingsFrame(0, settings={SettingsFrame.MAX_CONCURRENT_STREAMS: 100}).serialize() * 5000
    )
    while _running(targets):
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", targets.gateway), STEP
            )
            writer.write(flood)
            await asyncio.sleep(2)  # not reading: the ACKs pile up on the gateway's side
            received = bytearray()
            with contextlib.suppress(TimeoutError, OSError):
                while chunk := await asyncio.wait_for(reader.read(65536), 1):
                    received += chunk
            tally.add("h2 SETTINGS flood", _frame_summary(bytes(received)))
            writer.close()
        except (OSError, TimeoutError) as error:
            tally.add("h2 SETTINGS flood", f"failed: {_describe(error)}")


async def _h2_rapid_reset(targets: Targets, tally: Tally) -> None:
    """Open a request and cancel it at once, hundreds of times per connection."""
    body = STREAM_BODY.encode()
    while _running(targets):
        try:
            client = await H2Client.open(targets.gateway)
            outcome = "kept open"
            for n in range(500):
                stream = client.request(f"{CHAT}?tokens=50", body)
                client.conn.reset_stream(stream)
                client.flush()
                if n % 25 == 24:
                    events = await client.events(0.05)
                    ended = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
                    if ended:
                        outcome = f"GOAWAY {_error_name(ended[0].error_code)}"
                        break
            tally.add("h2 rapid reset (500/conn)", outcome)
            client.close()
        except (OSError, TimeoutError, h2.exceptions.ProtocolError) as error:
            tally.add("h2 rapid reset (500/conn)", f"failed: {_describe(error)}")


# Garbage gRPC.


async def _garbage_grpc(targets: Targets, port: int, kind: str, tally: Tally) -> None:
    payloads = [b"\xff\xff\xff\xff", b"\x0a\x02\xff\xfe", b"\x1a\x10\x0a", os.urandom(64)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        n = 0
        while _running(targets):
            n += 1
            payload = payloads[n % len(payloads)]
            method = ("IsActive", "GetMetricSpec", "GetMetrics", "StreamIsActive")[n % 4]
            try:
                if method == "StreamIsActive":
                    call = channel.unary_stream(SCALER + method)(payload, timeout=STEP)
                    await call.read()
                    call.cancel()
                else:
                    await channel.unary_unary(SCALER + method)(payload, timeout=STEP)
                tally.add(kind, "OK")
            except grpc.aio.AioRpcError as error:
                tally.add(kind, error.code().name)
            await asyncio.sleep(PACE)


# Helpers.


def _running(targets: Targets) -> bool:
    return asyncio.get_running_loop().time() < targets.deadline


async def _first_answer(port: int, request: bytes) -> str:
    """The status of the first response to `request`, or how the connection ended."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), STEP)
    except (OSError, TimeoutError):
        return "connect failed"
    try:
        writer.write(request)
        answer = await asyncio.wait_for(reader.read(4096), STEP)
        return _status_of(answer) if answer else "closed"
    except TimeoutError:
        return "no answer"
    except OSError:
        return "reset"
    finally:
        writer.close()


def _status_of(answer: bytes) -> str:
    match = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return f"HTTP {match.group(1).decode()}" if match else f"non-HTTP {answer[:12]!r}"


def _stream_outcome(events: list[h2.events.Event], stream: int) -> str | None:
    for event in events:
        if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
            status = dict(event.headers).get(b":status", b"?").decode()
            return f"HTTP {status}"
        if isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
            return f"RST_STREAM {_error_name(event.error_code)}"
        if isinstance(event, h2.events.ConnectionTerminated):
            return f"GOAWAY {_error_name(event.error_code)}"
    return None


def _frame_summary(data: bytes) -> str:
    """`<n> SETTINGS ACKs` bucketed, plus a GOAWAY's error code if one came."""
    acks, goaway, at = 0, "", 0
    while at + 9 <= len(data):
        length = int.from_bytes(data[at : at + 3], "big")
        kind, flags = data[at + 3], data[at + 4]
        if kind == 0x4 and flags & 0x1:
            acks += 1
        elif kind == 0x7 and at + 17 <= len(data):
            goaway = f", GOAWAY {_error_name(int.from_bytes(data[at + 13 : at + 17], 'big'))}"
        at += 9 + length
    return f"{_bucket_count(acks)} ACKs of 5001{goaway}"


def _error_name(code: object) -> str:
    name: object = getattr(code, "name", code)
    return str(name)


def _describe(error: BaseException) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return str(error.code().name)
    return type(error).__name__


def _bucket(seconds: float) -> str:
    """Durations by order of magnitude, so outcomes group instead of scattering."""
    for limit in (1, 2, 5, 10, 20, 40):
        if seconds < limit:
            return f"<{limit}s"
    return ">=40s"


def _bucket_count(n: int) -> str:
    for limit in (1, 10, 100, 1000, 5001):
        if n < limit:
            return f"<{limit}"
    return f">={limit}"


def _client_connections(process: procs.Process) -> int:
    """Client connections the gateway holds (not its listener, not its pool to the engine):
    each costs a file descriptor and memory."""
    pid, port = process.popen.pid, int(process.url.rsplit(":", 1)[1])
    sockets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed since the listing
            sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    held = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            listening = state == "0A"
            held += local_port == port and not listening and f"socket:[{inode}]" in sockets
    return held


async def _sample_rss(gateway: procs.Process, peak: list[float]) -> None:
    while True:
        with contextlib.suppress(OSError, AssertionError):
            peak.append(gateway.rss_mib())
        await asyncio.sleep(0.5)


async def _settled_pending(url: str, until: float) -> float | None:
    """`noctaya_gateway_pending`, polled until it reaches 0 or `until` passes."""
    value: float | None = None
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=STEP)) as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url + "/metrics") as reply:
                    match = re.search(
                        r"^noctaya_gateway_pending (\S+)$", await reply.text(), re.MULTILINE
                    )
                    value = float(match.group(1)) if match else None
            if value == 0 or loop.time() >= until:
                return value
            await asyncio.sleep(0.5)


def _abusers(targets: Targets, tally: Tally) -> dict[str, Callable[[], list[Awaitable[None]]]]:
    """The abusive clients by group (`--only` picks groups, to find which one costs what)."""
    gateway, aggregator = targets.gateway, targets.aggregator
    return {
        "slow": lambda: [
            *(_trickle(gateway, targets, tally, "slow body", SLOW_BODY) for _ in range(3)),
            *(_trickle(gateway, targets, tally, "slow head", SLOW_HEAD) for _ in range(3)),
            _trickle(aggregator, targets, tally, "slow report body (aggregator)", SLOW_REPORT),
            _trickle(aggregator, targets, tally, "slow head (aggregator)", SLOW_HEAD),
        ],
        "h2-window": lambda: [_h2_closed_window(targets, tally) for _ in range(2)],
        "h2-headers": lambda: [_h2_bad_headers(targets, tally)],
        "h2-settings": lambda: [_h2_settings_flood(targets, tally)],
        "h2-reset": lambda: [_h2_rapid_reset(targets, tally)],
        "http1": lambda: [_http1_oddities(targets, tally)],
        "reports": lambda: [_hostile_reports(targets, tally) for _ in range(2)],
        "grpc": lambda: [
            _garbage_grpc(targets, targets.gateway_scaler, "garbage gRPC (gateway)", tally),
            _garbage_grpc(targets, targets.aggregator_scaler, "garbage gRPC (aggregator)", tally),
        ],
    }


def _report(
    tally: Tally,
    good: Tally,
    rss: tuple[float, float, float],
    connections: int,
    pending: float | None,
    late: set[asyncio.Task[None]],
    crashed: list[asyncio.Task[None]],
    logs: Path,
) -> int:
    print("Abusive clients (outcome: count)")
    for client, outcomes in sorted(tally.outcomes.items()):
        print(f"  {client}: " + ", ".join(f"{o}: {n}" for o, n in outcomes.most_common()))
    print("Well-formed traffic")
    failures = 0
    for client, outcomes in sorted(good.outcomes.items()):
        bad = sum(n for outcome, n in outcomes.items() if outcome != "ok")
        failures += bad
        detail = ", ".join(f"{o}: {n}" for o, n in outcomes.most_common() if o != "ok")
        print(f"  {client}: {outcomes['ok']} ok, {bad} failed" + (f" ({detail})" if detail else ""))
    start, peak, end = rss
    print(f"Gateway RSS (VmRSS): start {start:.1f} MiB, peak {peak:.1f} MiB, end {end:.1f} MiB")
    print(f"Client connections the gateway still holds once every client is gone: {connections}")
    print(f"noctaya_gateway_pending at the end: {pending}")
    tracebacks = {}
    for name in ("gateway.log", "aggregator.log"):
        text = (logs / name).read_text(errors="replace")
        tracebacks[name] = text.count("Traceback")
        print(f"{name}: {tracebacks[name]} tracebacks" + _last_lines_of_tracebacks(text))
    print(f"logs kept in {logs}")
    if late or crashed:
        print(f"soak clients that overran: {len(late)}, that crashed: {len(crashed)}")
        for task in crashed:
            print(f"  {task.exception()!r}")
    healthy = (
        not failures
        and pending == 0
        and connections == 0
        and not any(tracebacks.values())
        and not late
        and not crashed
    )
    print("verdict: " + ("clean" if healthy else "NOT clean"))
    return 0 if healthy else 1


def _last_lines_of_tracebacks(text: str) -> str:
    """The exception line closing each distinct traceback, so the report says what failed."""
    endings: Counter[str] = Counter()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Traceback"):
            following = lines[index + 1 :]
            ending = next((entry for entry in following if not entry.startswith(" ")), "?")
            endings[ending[:160]] += 1
    return "".join(f"\n    {n} x {ending}" for ending, n in endings.most_common(8))


if __name__ == "__main__":
    sys.exit(main())
