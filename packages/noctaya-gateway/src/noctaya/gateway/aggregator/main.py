"""The `--mode=aggregator` process: configuration, signals, logging and exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping

from noctaya.gateway.aggregator.config import load_config
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.process import running as process
from noctaya.gateway.process.addresses import with_port
from noctaya.gateway.process.version import gateway_version
from noctaya.gateway.server.tested_versions import UntestedServerLibrary

SHUTDOWN_TIMEOUT_SECONDS = 20.0

_log = logging.getLogger("noctaya.gateway.aggregator")


def run(environ: Mapping[str, str]) -> int:
    """Serve until SIGTERM/SIGINT; 0 after a clean shutdown, 1 if startup failed."""
    process.configure_logging()
    try:
        config = load_config(environ)
    except ValueError as exc:
        _log.critical("%s", exc)
        return 1
    return process.run(_serve(AggregatorServer(config)))


async def _serve(server: AggregatorServer) -> int:
    try:
        await server.start()
    except (OSError, ValueError, UntestedServerLibrary) as exc:
        _log.critical("%s", exc)
        return 1
    config = server.config
    _log.info(
        "Noctaya demand aggregator version %s listening on %s",
        gateway_version(),
        with_port(config.listen_addr, server.http_port),
    )
    _log.info(
        "Noctaya external scaler listening on %s",
        with_port(config.scaler_listen_addr, server.scaler_port),
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    _log.info("Noctaya demand aggregator shutting down")
    await server.stop(SHUTDOWN_TIMEOUT_SECONDS)
    return 0
