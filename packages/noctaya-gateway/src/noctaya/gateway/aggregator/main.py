"""The `--mode=aggregator` process: configuration, signals, logging and exit code."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version

from noctaya.gateway.aggregator.config import load_config
from noctaya.gateway.aggregator.server import AggregatorServer

SHUTDOWN_TIMEOUT_SECONDS = 20.0

_log = logging.getLogger("noctaya.gateway.aggregator")


def run(environ: Mapping[str, str]) -> int:
    """Serve until SIGTERM/SIGINT; 0 after a clean shutdown, 1 if startup failed."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        config = load_config(environ)
    except ValueError as exc:
        _log.error("%s", exc)
        return 1
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_serve(AggregatorServer(config)))


async def _serve(server: AggregatorServer) -> int:
    try:
        await server.start()
    except (OSError, ValueError) as exc:
        _log.error("%s", exc)
        return 1
    _log.info(
        "Noctaya demand aggregator version %s listening on %s",
        _version(),
        server.config.listen_addr,
    )
    _log.info("Noctaya external scaler listening on %s", server.config.scaler_listen_addr)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await stopping.wait()
    _log.info("Noctaya demand aggregator shutting down")
    await server.stop(SHUTDOWN_TIMEOUT_SECONDS)
    return 0


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _version() -> str:
    try:
        return version("noctaya-gateway")
    except PackageNotFoundError:
        return "unknown"
