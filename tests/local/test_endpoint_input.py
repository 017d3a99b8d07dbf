"""What clients may throw at local mode's endpoint, over raw sockets: it answers in the OpenAI
error shape on `/v1/*`, never forwards what it cannot route, and keeps serving."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import stub_file
from .support import wait_until


@pytest.fixture
def endpoint(tmp_path: Path, start_local: StartLocal) -> Iterator[tuple[str, int]]:
    """Two services behind one endpoint: (host, port)."""
    stub_file(tmp_path, "a", free_port())
    stub_file(tmp_path, "b", free_port())
    local = start_local(tmp_path)
    assert wait_until(lambda: local.count(log_lines.SERVING_RE) == 2), local.log()
    url = local.wait_for(log_lines.ENDPOINT_RE)["url"]
    host, port = url.removeprefix("http://").removesuffix("/v1").rsplit(":", 1)
    yield host, int(port)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0, "nothing here wakes an engine"
    assert "Traceback" not in local.log()


def exchange(address: tuple[str, int], request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; the status, headers and body of the answer (read until close)."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = (line.split(":", 1) for line in lines)
    headers = {name.lower(): value.strip() for name, value in fields}
    return int(status_line.split()[1]), headers, body


def post(model: object) -> bytes:
    body = json.dumps({"model": model, "messages": []}).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


def test_requests_the_endpoint_cannot_route_get_openai_errors(
    endpoint: tuple[str, int],
) -> None:
    status, _, body = exchange(endpoint, post(["a"]))
    assert (status, error_code(body)) == (400, "model_required")
    status, _, body = exchange(endpoint, post(None))
    assert (status, error_code(body)) == (400, "model_required")
    status, _, body = exchange(endpoint, post("x" * 100_000))
    assert (status, error_code(body)) == (404, "model_not_found")
    assert len(body) < 1000, "the unknown name is cut short in the message"
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{nope"
    status, _, body = exchange(endpoint, request.replace(b"Host", b"Connection: close\r\nHost"))
    assert (status, error_code(body)) == (400, "model_required")


def test_the_method_the_target_and_the_body_size_are_checked_first(
    endpoint: tuple[str, int],
) -> None:
    status, headers, body = exchange(endpoint, b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n")
    assert (status, headers["connection"]) == (405, "close")
    assert "POST" in headers["allow"]
    status, headers, _ = exchange(endpoint, b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, headers["connection"]) == (400, "close")
    absolute = b"GET http://x/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    status, _, body = exchange(endpoint, absolute)
    assert status == 200
    assert sorted(model["id"] for model in json.loads(body)["data"]) == ["a", "b"]
    head, _, _ = post("a").partition(b"\r\n\r\n")
    too_large = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % (8 << 20 | 1), head)
    status, _, body = exchange(endpoint, too_large + b"\r\n\r\n")
    assert (status, error_code(body)) == (413, "request_too_large")
