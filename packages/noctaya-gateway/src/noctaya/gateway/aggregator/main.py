"""The `--mode=aggregator` process: configuration, signals, logging and exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING

from noctaya.gateway.aggregator.config import AggregatorConfig, load_config
from noctaya.gateway.aggregator.server import AggregatorServer
from noctaya.gateway.process import running as process
from noctaya.gateway.process.addresses import with_port
from noctaya.gateway.process.version import gateway_version
from noctaya.gateway.server.tested_versions import UntestedServerLibrary

if TYPE_CHECKING:
    from noctaya.gateway.backend.endpoints import EndpointWatch

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
    return process.run(_serve(config))


async def _serve(config: AggregatorConfig) -> int:
    pods = _pod_watch(config)
    try:
        return await _serve_with(AggregatorServer(config, pods=pods))
    finally:
        if pods is not None:
            await pods.close()


def _pod_watch(config: AggregatorConfig) -> EndpointWatch | None:
    """For kvCacheUtil: the backend's pods, followed as the gateway follows them; a watch that
    cannot work leaves no pod to read (the sum is 0) and retries, as in the gateway."""
    wanted = config.backend_endpoints
    if wanted is None:
        return None
    from noctaya.gateway.backend.endpoints import follow
    from noctaya.gateway.process.config import ENDPOINTS_RETRY_SECONDS

    watch = follow(wanted, ENDPOINTS_RETRY_SECONDS)
    watch.start()
    return watch


async def _serve_with(server: AggregatorServer) -> int:
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
