"""Which HTTP server should carry the aggregator's demand reports? Measure, don't guess.

Serves the same AggregatorRoutes (token check, JSON decode, member table) through (a) the lean
h11 server the aggregator uses and (b) hypercorn via a thin ASGI adapter, each in its own process
on uvloop, and drives them with keep-alive clients posting accepted reports.

    .venv/bin/python benchmarks/scaler/aggregator_http.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

from loadgen import percentile, print_table, run_load

TOKEN = "b" * 43


def _serve(kind: str, token_file: str, ready: Any) -> None:
    import uvloop
    from noctaya.gateway.aggregator.aggregate import Aggregate
    from noctaya.gateway.aggregator.http_server import HTTPServer
    from noctaya.gateway.aggregator.metrics import AggregatorMetrics
    from noctaya.gateway.aggregator.routes import AggregatorRoutes

    async def main() -> None:
        metrics = AggregatorMetrics()
        routes = AggregatorRoutes(Aggregate(1024, metrics), metrics, token_file, 100)
        if kind == "lean-h11":
            port = await HTTPServer(routes).start("127.0.0.1", 0)
            ready.send(port)
            await asyncio.Event().wait()
        else:
            import socket

            from hypercorn.asyncio import serve
            from hypercorn.config import Config

            sock = socket.create_server(("127.0.0.1", 0))
            config = Config()
            config.bind = [f"fd://{sock.fileno()}"]
            config.accesslog = None
            ready.send(sock.getsockname()[1])
            sock.detach()
            await serve(_AsgiAdapter(routes), config)  # type: ignore[arg-type]

    uvloop.run(main())


class _AsgiAdapter:
    """The same routes behind ASGI, for the comparison only."""

    def __init__(self, routes: Any) -> None:
        self.routes = routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        adapter = self

        class _Request:
            method = scope["method"]
            path = scope["path"]
            headers = scope["headers"]

            def header(self, name: bytes) -> bytes | None:
                return next((v for k, v in scope["headers"] if k == name), None)

            async def read_body(self, limit: int) -> bytes:
                chunks = b""
                while True:
                    message = await receive()
                    chunks += message.get("body", b"")
                    if len(chunks) > limit:
                        from noctaya.gateway.aggregator.http_server import BodyTooLarge

                        raise BodyTooLarge
                    if not message.get("more_body"):
                        return chunks

        response = await adapter.routes(_Request())
        headers = [(k.lower().encode(), v.encode()) for k, v in response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})


def _report_request(client: int, n: int) -> bytes:
    body = json.dumps({"memberID": f"gw/{client}", "sequence": n, "demand": n % 3}).encode()
    return (
        b"POST /v1/demand HTTP/1.1\r\nHost: aggregator\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    token_file = os.path.join(tempfile.mkdtemp(), "token")
    with open(token_file, "w") as handle:
        handle.write(TOKEN)
    rows = []
    for kind in ("lean-h11", "hypercorn"):
        parent, child = multiprocessing.Pipe()
        server = multiprocessing.Process(target=_serve, args=(kind, token_file, child), daemon=True)
        server.start()
        port = parent.recv()
        time.sleep(0.3)
        for connections in (1, 64):
            tally = asyncio.run(run_load(port, connections, args.seconds, _report_request))
            done = len(tally.latencies)
            rows.append(
                (
                    kind,
                    connections,
                    round(done / args.seconds),
                    percentile(tally.latencies, 0.5) * 1e3,
                    percentile(tally.latencies, 0.99) * 1e3,
                    tally.statuses,
                    tally.errors,
                )
            )
        server.terminate()
        server.join()
    print_table(("server", "conns", "req/s", "p50 ms", "p99 ms", "statuses", "errors"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
