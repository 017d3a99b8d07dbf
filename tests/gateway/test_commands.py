"""`noctaya-gateway` and `noctaya-engine-stub` as real processes: flags, startup errors, the
SIGTERM drain, an engine killed mid-stream, and the KEDA scaler served from the same process."""

from __future__ import annotations

import hashlib
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import grpc
import pytest
from noctaya.gateway.server.listen_socket import listen_socket
from noctaya.local.externalscaler import externalscaler_pb2 as pb
from noctaya.local.externalscaler import externalscaler_pb2_grpc as pb_grpc

from .support import (
    BIN,
    Command,
    eventually,
    metric,
    read_events,
    start_gateway_command,
    token_texts,
)

StartCommand = Callable[..., Command]
LISTENING = r"listening on 127\.0\.0\.1:(\d+)"


def _run(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / name), *args], env=env or {}, capture_output=True, text=True, timeout=60
    )


def test_version_flag_prints_the_version() -> None:
    result = _run("noctaya-gateway", "--version")
    assert result.returncode == 0
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", result.stdout)


def test_unsupported_mode_is_fatal() -> None:
    result = _run("noctaya-gateway", "--mode=sidecar")
    assert result.returncode == 1
    assert 'unsupported mode "sidecar"' in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "NOCTAYA_BACKEND_URL is required"),
        ({"NOCTAYA_BACKEND_URL": "backend:8000"}, "backend URL must be an absolute HTTP URL"),
        (
            {"NOCTAYA_BACKEND_URL": "http://b", "NOCTAYA_CLIENT_API_KEY_FILE": "/nonexistent"},
            "read client API key: ",
        ),
        (
            {"NOCTAYA_BACKEND_URL": "http://b", "NOCTAYA_SCALER_TLS_CERT_FILE": "/c.pem"},
            "NOCTAYA_SCALER_TLS_CERT_FILE, NOCTAYA_SCALER_TLS_KEY_FILE, and "
            "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE must be set together",
        ),
    ],
    ids=["no-backend", "relative-backend", "unreadable-key", "partial-tls"],
)
def test_startup_errors_exit_1_with_one_clear_line(env: dict[str, str], message: str) -> None:
    env = {"NOCTAYA_LISTEN_ADDR": "127.0.0.1:0", "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0", **env}
    result = _run("noctaya-gateway", env=env)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_busy_listen_port_is_a_clear_startup_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {
            "NOCTAYA_BACKEND_URL": "http://127.0.0.1:9",
            "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{port}",
        }
        result = _run("noctaya-gateway", env=env)
    assert result.returncode == 1
    assert _log_lines(result.stderr) == [
        f"listen tcp 127.0.0.1:{port}: bind: address already in use"
    ]


def test_an_address_not_on_this_host_is_a_clear_startup_error() -> None:
    env = {"NOCTAYA_BACKEND_URL": "http://127.0.0.1:9", "NOCTAYA_LISTEN_ADDR": "192.0.2.1:8080"}
    result = _run("noctaya-gateway", env=env)
    assert result.returncode == 1
    assert _log_lines(result.stderr) == [
        "listen tcp 192.0.2.1:8080: bind: cannot assign requested address"
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {
                "NOCTAYA_SCALER_TLS_CERT_FILE": "/nonexistent/tls.crt",
                "NOCTAYA_SCALER_TLS_KEY_FILE": "/nonexistent/tls.key",
                "NOCTAYA_SCALER_TLS_CLIENT_CA_FILE": "/nonexistent/ca.crt",
            },
            "load external scaler server certificate: "
            "open /nonexistent/tls.crt: no such file or directory",
        ),
        (
            {
                "NOCTAYA_DEMAND_AGGREGATOR_URL": "http://127.0.0.1:9/",
                "NOCTAYA_DEMAND_AUTH_TOKEN_FILE": "/nonexistent/token",
            },
            "read demand authentication token: open /nonexistent/token: no such file or directory",
        ),
    ],
    ids=["scaler-tls", "reporter-token"],
)
def test_scaler_and_reporter_settings_are_checked_before_the_http_port_is_opened(
    env: dict[str, str], message: str
) -> None:
    """The HTTP port is held by someone else: had the gateway bound it first, it would have
    failed on that instead, after logging that it listens."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {
            "NOCTAYA_BACKEND_URL": "http://127.0.0.1:9",
            "NOCTAYA_LISTEN_ADDR": f"127.0.0.1:{port}",
            "NOCTAYA_SCALER_LISTEN_ADDR": "127.0.0.1:0",
            **env,
        }
        result = _run("noctaya-gateway", env=env)
    assert result.returncode == 1
    assert _log_lines(result.stderr) == [message]


def _log_lines(stderr: str) -> list[str]:
    """The messages of Go-style log lines (`2006/01/02 15:04:05 message`)."""
    return [line.split(" ", 2)[2] for line in stderr.splitlines()]


def test_engine_stub_help_says_it_is_a_test_double_for_vllm() -> None:
    result = _run("noctaya-engine-stub", "--help")
    assert result.returncode == 0
    assert "test double for vLLM" in result.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STUB_STARTUP_DELAY": "-1s"}, "STUB_STARTUP_DELAY must be a non-negative duration"),
        ({"STUB_STARTUP_DELAY": "soon"}, "STUB_STARTUP_DELAY must be a non-negative duration"),
        ({"STUB_TOKEN_COUNT": "0"}, "STUB_TOKEN_COUNT must be a positive integer"),
        ({"STUB_TOKEN_DELAY": "fast"}, "STUB_TOKEN_DELAY must be a non-negative duration"),
        ({"STUB_MEMORY": "1.5"}, "STUB_MEMORY must be a whole number of bytes such as 256Mi"),
        ({"STUB_MEMORY": "lots"}, "STUB_MEMORY must be a whole number of bytes such as 256Mi"),
        ({"STUB_EXIT_AFTER": "-1s"}, "STUB_EXIT_AFTER must be a non-negative duration"),
        ({"STUB_LIST_MODEL": "yes"}, "STUB_LIST_MODEL must be true or false"),
        ({"STUB_LIST_MODEL": "true"}, "STUB_LIST_MODEL: --model 'ignored': "),
    ],
)
def test_engine_stub_refuses_bad_settings(env: dict[str, str], message: str) -> None:
    result = _run("noctaya-engine-stub", "--model=ignored", env=env)
    assert result.returncode == 1
    assert message in result.stderr


async def test_engine_stub_holds_the_memory_it_is_told_to(commands: StartCommand) -> None:
    engine, _ = await _engine(commands, STUB_MEMORY="64Mi")
    assert _resident_bytes(engine.process.pid) >= 64 * 2**20
    baseline, _ = await _engine(commands)
    assert _resident_bytes(baseline.process.pid) < 64 * 2**20


def _resident_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) * 1024


async def test_engine_stub_exits_1_after_a_set_time_as_a_failed_start_up(
    commands: StartCommand,
) -> None:
    engine, url = await _engine(commands, STUB_EXIT_AFTER="1s", STUB_STARTUP_DELAY="1h")
    started = time.monotonic()
    async with aiohttp.ClientSession() as http, http.get(f"{url}/health") as health:
        assert health.status == 503
    assert await engine.wait_exit(within=10) == 1
    assert 0.5 <= time.monotonic() - started <= 3
    assert "exiting after 1s (STUB_EXIT_AFTER)" in engine.text()


async def test_engine_stub_lists_the_model_directory_it_was_given(
    commands: StartCommand, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    (model / "tokenizer").mkdir(parents=True)
    (model / "config.json").write_bytes(b"{}")
    vocab = b"a\nb\n"
    (model / "tokenizer" / "vocab.txt").write_bytes(vocab)
    engine = commands(
        "noctaya-engine-stub",
        {"STUB_LISTEN_ADDR": "127.0.0.1:0", "STUB_LIST_MODEL": "true"},
        f"--model={model}",
        "--served-model-name=m",
    )
    await engine.wait_for_line(LISTENING)
    files = re.findall(r"model file (\S+ \d+ sha256:[0-9a-f]{64})", engine.text())
    assert files == [
        f"config.json 2 sha256:{hashlib.sha256(b'{}').hexdigest()}",
        f"tokenizer/vocab.txt 4 sha256:{hashlib.sha256(vocab).hexdigest()}",
    ]


async def _engine(commands: StartCommand, **env: str) -> tuple[Command, str]:
    engine = commands("noctaya-engine-stub", {"STUB_LISTEN_ADDR": "127.0.0.1:0", **env})
    port = (await engine.wait_for_line(LISTENING)).group(1)
    return engine, f"http://127.0.0.1:{port}"


async def _gateway(commands: StartCommand, backend: str, **env: str) -> tuple[Command, str]:
    gateway, port = await start_gateway_command(commands, backend, **env)
    return gateway, f"http://127.0.0.1:{port}"


async def test_stream_open_at_sigterm_completes_and_new_connections_are_refused(
    commands: StartCommand,
) -> None:
    _, backend = await _engine(commands, STUB_TOKEN_COUNT="8", STUB_TOKEN_DELAY="150ms")
    gateway, url = await _gateway(commands, backend)
    async with aiohttp.ClientSession() as http:
        response = await http.post(f"{url}/v1/chat/completions", json={"stream": True})
        assert (await response.content.readuntil(b"\n\n")).startswith(b"data: {")
        gateway.signal(signal.SIGTERM)
        await gateway.wait_for_line("Noctaya gateway shutting down")
        with pytest.raises(aiohttp.ClientConnectionError):
            async with aiohttp.ClientSession() as fresh:
                await fresh.get(f"{url}/healthz")
        blocks = await read_events(response)
        response.release()
    assert len(token_texts(blocks)) == 7, "the rest of the stream arrived after SIGTERM"
    assert blocks[-1] == "data: [DONE]"
    assert await gateway.wait_exit(within=20) == 0


async def test_engine_killed_mid_stream_ends_the_client_stream_and_the_gateway_stays_healthy(
    commands: StartCommand,
) -> None:
    engine, backend = await _engine(commands, STUB_TOKEN_COUNT="100", STUB_TOKEN_DELAY="50ms")
    _, url = await _gateway(commands, backend)
    async with aiohttp.ClientSession() as http:
        response = await http.post(f"{url}/v1/chat/completions", json={"stream": True})
        assert response.status == 200
        assert (await response.content.readuntil(b"\n\n")).startswith(b"data: {")
        engine.signal(signal.SIGKILL)
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_events(response)
        response.release()
        async with http.get(f"{url}/healthz") as health:
            assert health.status == 200

        async def slot_freed() -> bool:
            async with http.get(f"{url}/metrics") as reply:
                return metric(await reply.text(), "noctaya_gateway_pending") == 0

        await eventually(slot_freed, what="the pending gauge back to 0")


async def test_single_gateway_serves_the_keda_scaler_from_the_same_process(
    commands: StartCommand,
) -> None:
    # No engine: the backend is never ready, so a reject-mode request leaves the lease floor.
    gateway, url = await _gateway(commands, "http://127.0.0.1:9", NOCTAYA_COLDSTART_MODE="reject")
    port = (await gateway.wait_for_line(r"external scaler " + LISTENING)).group(1)
    ref = pb.ScaledObjectRef(name="svc", namespace="ns", scalerMetadata={"targetValue": "1"})
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        scaler = pb_grpc.ExternalScalerStub(channel)
        assert (await scaler.IsActive(ref, timeout=10)).result is False
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{url}/v1/completions", json={}) as response,
        ):
            assert response.status == 503
        assert (await scaler.IsActive(ref, timeout=10)).result is True
        request = pb.GetMetricsRequest(scaledObjectRef=ref, metricName="pending")
        reply = await scaler.GetMetrics(request, timeout=10)
        assert reply.metricValues[0].metricValueFloat == 1
    gateway.signal(signal.SIGTERM)
    assert await gateway.wait_exit(within=20) == 0
    version = _run("noctaya-gateway", "--version").stdout.strip()
    assert [re.sub(r":\d+", ":<port>", line) for line in _log_lines(gateway.text())] == [
        f"Noctaya gateway version {version} listening on 127.0.0.1:<port>, "
        "backend http://127.0.0.1:<port>",
        "Noctaya external scaler listening on 127.0.0.1:<port>",
        "Noctaya gateway shutting down",
    ], "the gateway's own lifecycle lines and no others (not even hypercorn's banner)"


def test_an_ipv6_literal_listen_address_binds_that_address() -> None:
    with listen_socket("[::1]:0") as sock:
        assert sock.family == socket.AF_INET6
        assert sock.getsockname()[0] == "::1"
