"""The `--mode=gateway` process: configuration, the server, signals and exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping

from noctaya.gateway.process import gc_tuning
from noctaya.gateway.process import running as process
from noctaya.gateway.process.config import GatewayConfig, load_config
from noctaya.gateway.process.config_shared import ConfigError
from noctaya.gateway.process.gateway_server import GatewayServer
from noctaya.gateway.server.tested_versions import UntestedServerLibrary

log = logging.getLogger("noctaya.gateway")


def run(environ: Mapping[str, str]) -> int:
    """Serve until SIGTERM/SIGINT; 0 after the drain, 1 if startup failed."""
    try:
        config = load_config(environ)
    except ConfigError as error:
        log.critical("%s", error)
        return 1
    return process.run(serve_until_signalled(config, environ))


async def serve_until_signalled(config: GatewayConfig, environ: Mapping[str, str]) -> int:
    server = GatewayServer(config, environ)
    try:
        await server.start()
    except (ValueError, OSError, UntestedServerLibrary) as error:
        log.critical("%s", error)
        return 1
    gc_tuning.settle_after_startup()
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled.set)
    waiting = asyncio.ensure_future(signalled.wait())
    serving = asyncio.ensure_future(server.wait())
    await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    log.info("Noctaya gateway shutting down")
    await server.stop()
    return 0
