"""`noctaya-gateway --mode=aggregator` as a process: startup errors, log lines, signals."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
from gateway.support import Command, start_command
from support.ports import free_port

from .keda import Keda

Start = Callable[..., Command]


@pytest.fixture
def aggregator_command(tmp_path: Path) -> Iterator[Start]:
    started: list[Command] = []

    def start(env: dict[str, str]) -> Command:
        log = tmp_path / f"aggregator-{len(started)}.log"
        command = start_command("noctaya-gateway", env, log, "--mode=aggregator")
        started.append(command)
        return command

    yield start
    for command in started:
        command.stop()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NOCTAYA_DEMAND_AUTH_TOKEN_FILE": ""}, "demand authentication token file is required"),
        (
            {"NOCTAYA_MAX_GATEWAY_MEMBERS": "lots"},
            "NOCTAYA_MAX_GATEWAY_MEMBERS must be a positive integer",
        ),
        (
            {"NOCTAYA_MAX_GATEWAY_DEMAND": "0"},
            "NOCTAYA_MAX_GATEWAY_DEMAND must be a positive integer",
        ),
        (
            {"NOCTAYA_SCALER_TLS_CERT_FILE": "/tls.crt"},
            "NOCTAYA_SCALER_TLS_CERT_FILE, NOCTAYA_SCALER_TLS_KEY_FILE, and "
            "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE must be set together",
        ),
    ],
    ids=["no-token", "members", "demand", "partial-tls"],
)
async def test_bad_configuration_exits_1_with_the_reference_message(
    aggregator_command: Start, token_file: Path, env: dict[str, str], message: str
) -> None:
    command = aggregator_command({"NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file), **env})
    assert await command.wait_exit(within=30) == 1
    assert message in command.text()
    assert "Traceback" not in command.text()


async def test_taken_port_exits_1_with_a_clear_message(
    aggregator_command: Start, token_file: Path
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        command = aggregator_command(
            {
                "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
                "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{port}",
                "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{free_port()}",
            }
        )
        assert await command.wait_exit(within=30) == 1
    assert "Traceback" not in command.text()
    assert "address already in use" in command.text().lower()


async def test_serves_logs_and_stops_promptly_on_sigterm_with_a_keda_stream_open(
    aggregator_command: Start, token_file: Path
) -> None:
    http_port, grpc_port = free_port(), free_port()
    command = aggregator_command(
        {
            "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": str(token_file),
            "NOCTAYA_AGGREGATOR_LISTEN_ADDR": f"127.0.0.1:{http_port}",
            "NOCTAYA_SCALER_LISTEN_ADDR": f"127.0.0.1:{grpc_port}",
        }
    )
    await command.wait_for_line(
        rf"Noctaya demand aggregator version \S+ listening on 127\.0\.0\.1:{http_port}"
    )
    await command.wait_for_line(rf"Noctaya external scaler listening on 127\.0\.0\.1:{grpc_port}")
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{http_port}/readyz") as ready,
    ):
        assert ready.status == 200
    keda = Keda.insecure(grpc_port)
    stream = keda.stream()
    assert await stream.next() is False
    command.signal(signal.SIGTERM)
    assert await command.wait_exit(within=10) == 0
    assert await stream.ended()
    await keda.close()
