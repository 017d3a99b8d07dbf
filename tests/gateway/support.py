"""Helpers for gateway tests: real servers on 127.0.0.1 (in-process or as commands), polling with
deadlines, and reading Prometheus text."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from noctaya.gateway.engine_stub import EngineStub, StubSettings
from noctaya.gateway.engine_stub.http11 import Exchange, Request, serve
from noctaya.gateway.metrics.exposition import Registry
from noctaya.gateway.process.gateway_server import GatewayServer

BIN = Path(sys.executable).parent


async def eventually(
    probe: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    within: float = 5.0,
    what: str = "condition",
) -> None:
    """Poll `probe` until it is true; fail with `what` after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = probe()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.01)


def metric(text: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The value of one sample in Prometheus text, or None when the series is absent."""
    label_text = ""
    if labels:
        label_text = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    pattern = re.compile(rf"^{re.escape(name + label_text)} (\S+)$", re.MULTILINE)
    match = pattern.search(text)
    return float(match.group(1)) if match else None


def sample(registry: Registry, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The value of one series in what `registry` serves, or None when it is absent."""
    return metric(registry.render().decode(), name, labels)


@dataclass
class Engine:
    """An in-process engine stub that records what reached it and how many streams it serves."""

    stub: EngineStub
    server: asyncio.Server
    url: str
    health_probes: int = 0
    active_streams: int = 0
    requests: list[Request] = field(default_factory=list)

    def make_ready(self) -> None:
        self.stub.ready_at = time.monotonic()

    def make_unready(self) -> None:
        self.stub.ready_at = float("inf")


async def start_engine(host: str = "127.0.0.1", port: int = 0, **settings: Any) -> Engine:
    """An engine stub listening on `host` (any loopback address: one "pod" of a backend)."""
    stub = EngineStub(StubSettings(**settings))
    engine: Engine

    def handler(request: Request, exchange: Exchange) -> Awaitable[None] | None:
        if request.path == "/health":
            engine.health_probes += 1
        else:
            engine.requests.append(request)
        answer = stub(request, exchange)
        if answer is None:
            return None
        engine.active_streams += 1

        async def tracked(answer: Awaitable[None] = answer) -> None:
            try:
                await answer
            finally:
                engine.active_streams -= 1

        return tracked()

    server = await serve(handler, host, port)
    port = server.sockets[0].getsockname()[1]
    engine = Engine(stub, server, f"http://{host}:{port}")
    return engine


@dataclass
class Gateway:
    server: GatewayServer
    url: str

    @property
    def pending(self) -> int:
        assert self.server.app is not None
        return self.server.app.demand.pending

    @property
    def demand(self) -> int:
        assert self.server.app is not None
        return self.server.app.demand.current()

    async def metrics(self, session: aiohttp.ClientSession) -> str:
        async with session.get(f"{self.url}/metrics") as response:
            return await response.text()


async def read_events(response: aiohttp.ClientResponse) -> list[str]:
    """Every SSE block of a streamed response, in arrival order."""
    blocks: list[str] = []
    buffer = ""
    async for chunk in response.content.iter_any():
        buffer += chunk.decode()
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            blocks.append(block)
    return blocks


def token_texts(blocks: list[str]) -> list[str]:
    """The `delta.content` of chat chunks among SSE blocks."""
    texts = []
    for block in blocks:
        if block.startswith("data: {"):
            document = json.loads(block[len("data: ") :])
            texts.append(document["choices"][0]["delta"]["content"])
    return texts


@dataclass
class Command:
    """A command started as its own process, logging to a file we can poll."""

    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for_line(self, pattern: str, within: float = 15.0) -> re.Match[str]:
        regex = re.compile(pattern)
        found: list[re.Match[str]] = []

        def probe() -> bool:
            match = regex.search(self.text())
            if match:
                found.append(match)
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"process exited early:\n{self.text()}")
            return False

        await eventually(probe, within=within, what=f"log line /{pattern}/")
        return found[0]

    def signal(self, sig: signal.Signals) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    async def wait_exit(self, within: float = 30.0) -> int:
        await eventually(
            lambda: self.process.poll() is not None, within=within, what="process exit"
        )
        code = self.process.returncode
        assert code is not None
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def start_command(name: str, env: Mapping[str, str], log: Path, *args: str) -> Command:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NOCTAYA_", "STUB_"))}
    environ.update(env)
    handle = log.open("wb")
    process = subprocess.Popen(
        [str(BIN / name), *args], env=environ, stdout=handle, stderr=subprocess.STDOUT
    )
    handle.close()
    return Command(process, log)


async def start_gateway_command(
    commands: Callable[..., Command], backend: str, **env: str
) -> tuple[Command, int]:
    """`noctaya-gateway` as its own process on a free loopback port: (command, HTTP port)."""
    gateway = commands(
        "noctaya-gateway",
        {
            "NOCTAYA_BACKEND_URL": backend,
            "NOCTAYA_LISTEN_ADDR": "127.0.0.1:0",
            "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
            **env,
        },
    )
    listening = await gateway.wait_for_line(r"gateway version \S+ listening on 127\.0\.0\.1:(\d+)")
    return gateway, int(listening.group(1))


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Echo:
    """A backend that describes the request it got; special paths misbehave on purpose."""

    server: asyncio.Server
    url: str


def _echo(request: Request, exchange: Exchange) -> Awaitable[None] | None:
    if request.path.endswith("/health"):
        exchange.respond(200, [], b"")
    elif request.path.startswith("/drop"):
        exchange.abort()
    elif request.path.startswith("/status/"):
        exchange.respond(int(request.path.rsplit("/", 1)[1]), [(b"x-backend", b"yes")], b"")
    elif request.path == "/hop-by-hop":
        exchange.respond(
            200,
            [
                (b"connection", b"x-backend-private"),
                (b"x-backend-private", b"1"),
                (b"keep-alive", b"timeout=5"),
                (b"proxy-authenticate", b"Basic"),
                (b"x-end-to-end", b"kept"),
            ],
            b"ok",
        )
    elif request.path == "/die-mid-stream":
        return _die_mid_stream(exchange)
    else:
        description = {
            "method": request.method,
            "path": request.path,
            "query": request.query,
            "headers": [[k.decode(), v.decode()] for k, v in request.headers],
            "body_length": len(request.body),
        }
        body = json.dumps(description).encode()
        exchange.respond(200, [(b"content-type", b"application/json")], body)
    return None


async def _die_mid_stream(exchange: Exchange) -> None:
    exchange.start_stream(200, [(b"content-type", b"text/event-stream")])
    exchange.write_chunk(b'data: {"partial": true}\n\n')
    await asyncio.sleep(0.05)
    exchange.abort()


async def start_echo() -> Echo:
    server = await serve(_echo, "127.0.0.1", 0)
    return Echo(server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")


async def raw_exchange(port: int, request: bytes) -> tuple[bytes, dict[str, str], bytes]:
    """Send raw bytes, read one Content-Length-framed response: (status line, headers, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return status.encode(), headers, body
    finally:
        writer.close()
