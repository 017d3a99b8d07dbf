"""`noctaya-engine-stub`: a test double for vLLM for tests, benchmarks and the no-GPU guide.

It speaks vLLM's OpenAI-compatible surface closely enough for the gateway, KEDA metrics and the
OpenAI SDK, and generates `tok0 tok1 …` instead of running a model.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.engine_stub.engine import EngineStub
from noctaya.gateway.engine_stub.http11 import serve
from noctaya.gateway.engine_stub.model_files import model_files
from noctaya.gateway.engine_stub.settings import SettingsError, StubSettings, load_settings
from noctaya.gateway.process import running as process
from noctaya.gateway.process.addresses import with_port

__all__ = ["EngineStub", "StubSettings", "load_settings", "main", "serve"]

DESCRIPTION = """\
A test double for vLLM: serves /health (503 until STUB_STARTUP_DELAY has passed),
/v1/chat/completions and /v1/completions (tokens "tok0 tok1 ...", streamed with
STUB_TOKEN_DELAY between tokens, count from ?tokens=N or STUB_TOKEN_COUNT), /metrics
(vLLM scheduler gauges) and POST /control (set the gauges). It runs no model.
Other command-line arguments (such as vLLM's --model=...) are accepted and ignored, but for
--model with STUB_LIST_MODEL.
Environment: STUB_LISTEN_ADDR (default :8000), STUB_STARTUP_DELAY (default 0s),
STUB_TOKEN_COUNT (default 1), STUB_TOKEN_DELAY (default 50ms); for fault tests STUB_MEMORY
(bytes written at start and held, e.g. 256Mi), STUB_EXIT_AFTER (exit 1 this long after start,
a start-up that fails) and STUB_LIST_MODEL (true: log each file of the --model directory with
its size and sha256 at start, exit 1 if it is not a directory)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="noctaya-engine-stub",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", help=argparse.SUPPRESS)
    model = parser.parse_known_args(argv)[0].model
    process.configure_logging()
    try:
        settings = load_settings(os.environ)
        host, port = parse_listen_address(settings.listen_addr)
    except (SettingsError, ValueError) as error:
        print(error, file=sys.stderr)
        return 1
    log = logging.getLogger("noctaya.engine_stub")
    if settings.list_model:
        try:
            for line in model_files(Path(model or "")):
                log.info("model file %s", line)
        except OSError as error:
            print(f"STUB_LIST_MODEL: --model {model!r}: {error}", file=sys.stderr)
            return 1
    held = b"\x01" * settings.memory  # written, so every page is resident
    if held:
        log.info("holding %d bytes (STUB_MEMORY)", len(held))
    return process.run(_run(EngineStub(settings), host, port, settings.listen_addr))


async def _run(stub: EngineStub, host: str, port: int, listen_addr: str) -> int:
    try:
        server = await serve(stub, host, port)
    except OSError as error:
        print(f"listen on {listen_addr}: {error}", file=sys.stderr)
        return 1
    bound = server.sockets[0].getsockname()[1]
    logging.getLogger("noctaya.engine_stub").info(
        "engine stub (a test double for vLLM) listening on %s", with_port(listen_addr, bound)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    failed = False
    try:
        async with asyncio.timeout(stub.settings.exit_after):
            await stop.wait()
    except TimeoutError:
        after = stub.settings.exit_after
        print(f"engine stub: exiting after {after:g}s (STUB_EXIT_AFTER)", file=sys.stderr)
        failed = True
    server.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(1):
            await server.wait_closed()
    return 1 if failed else 0
