"""Requests local mode's endpoint must answer without waking anything or losing anything: the
model list asked for with HEAD or a trailing slash, and bodies that a rename of `model` must not
change otherwise (a lone surrogate escape, a number no float holds, duplicate keys, a BOM).
Real local mode and gateways; engine stubs, and for the bodies an HTTP server that answers with
what reached it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
from noctaya.local import log_lines
from support.ports import free_port

from .conftest import StartLocal
from .many import status, stub_file
from .support import runtime_doc, service_doc, wait_until, write_manifest

QUIET = 2.0
"""Far longer than a request's demand takes to start an engine (the stub's start is logged)."""

ECHO_ENGINE = """\
import http.server, os

host, port = os.environ["STUB_LISTEN_ADDR"].rsplit(":", 1)


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.answer(b"")

    def do_POST(self):
        self.answer(self.rfile.read(int(self.headers["content-length"])))

    def answer(self, body):
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer((host, int(port)), Echo).serve_forever()
"""


def test_head_and_a_trailing_slash_on_the_model_list_start_no_engine(
    tmp_path: Path, start_local: StartLocal
) -> None:
    """One service, so a request the endpoint does not take for the model list goes to its
    gateway as demand, and starts its engine."""
    stub_file(tmp_path, "a", free_port())
    local = start_local(tmp_path)
    url = local.url().removesuffix("/v1")
    with httpx.Client(timeout=10) as client:
        listed = client.get(f"{url}/v1/models").content
        one = client.get(f"{url}/v1/models/a").content
        for path, expected in (
            ("/v1/models/", listed),
            ("/v1/models", listed),
            ("/v1/models/a/", one),
            ("/v1/models/a", one),
        ):
            for method in ("GET", "HEAD"):
                answer = client.request(method, f"{url}{path}")
                assert answer.status_code == 200, (method, path)
                assert answer.content == (expected if method == "GET" else b"")
                assert answer.headers["content-length"] == str(len(expected))
    time.sleep(QUIET)
    assert local.count(log_lines.ENGINE_STARTED_RE) == 0, local.log()
    assert status(local.url())["a"]["state"] == "cold"


def test_a_request_naming_the_service_reaches_the_engine_renamed_and_otherwise_as_sent(
    tmp_path: Path, start_local: StartLocal
) -> None:
    engine = tmp_path / "echo-engine"
    engine.write_text(f"#!{sys.executable}\n{ECHO_ENGINE}", encoding="utf-8")
    engine.chmod(0o755)
    runtime = runtime_doc(free_port(), command=str(engine))
    service = service_doc()
    service["metadata"]["name"] = "alpha"
    service["spec"]["runtime"]["argsOverride"] = ["--served-model-name=org/alpha-7b"]
    local = start_local(write_manifest(tmp_path / "alpha.yaml", runtime, service))
    url = local.url()
    bodies = [
        b'{"model": "alpha", "messages": [{"role": "user", "content": "\\ud800 and \\udfff"}]}',
        b'{"model":"alpha","temperature":1e999,"top_p":1.000000000000000000001,"n":-0}',
        '{\n  "messages": [{"content": "caf\u00e9 \U0001f600"}],\n  "model" : "alpha"\n}'.encode(),
        b'{"model": "org/alpha-7b-draft", "model": "alpha"}',
        '\ufeff{"model": "alpha"}'.encode(),
    ]
    with httpx.Client(timeout=30) as client:
        for body in bodies:
            answer = client.post(
                f"{url}/chat/completions",
                content=body,
                headers={"content-type": "application/json"},
            )
            assert answer.status_code == 200, (body, answer.text)
            head, _, tail = body.rpartition(b'"alpha"')
            assert answer.content == head + b'"org/alpha-7b"' + tail, body
    assert wait_until(lambda: local.count(log_lines.ENGINE_STARTED_RE) == 1)
    assert "Traceback" not in local.log()
