"""`noctaya-gateway`: the gateway (default) or, with `--mode=aggregator`, the demand aggregator.

Startup errors are printed as one line and exit 1, like Go's `log.Fatal`; SIGTERM and SIGINT
start the drain.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Mapping, Sequence

from noctaya.gateway import process
from noctaya.gateway.config import ConfigError, GatewayConfig, load_config
from noctaya.gateway.hypercorn_version import UntestedHypercorn
from noctaya.gateway.server import GatewayServer, gateway_version

log = logging.getLogger("noctaya.gateway")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="noctaya-gateway",
        description="Noctaya gateway: OpenAI-compatible admission proxy with controlled cold "
        "starts, KEDA external scaler, or (--mode=aggregator) the multi-gateway demand "
        "aggregator. Configured by NOCTAYA_* environment variables.",
    )
    parser.add_argument("--version", "-version", action="store_true", help="print the version")
    parser.add_argument("--mode", "-mode", default="gateway", help="gateway (default) | aggregator")
    args = parser.parse_args(argv)
    if args.version:
        print(gateway_version())
        return 0
    process.configure_logging()
    if args.mode == "aggregator":
        from noctaya.gateway.aggregator.main import run

        return run(os.environ)
    if args.mode != "gateway":
        log.critical('unsupported mode "%s"', args.mode)
        return 1
    try:
        config = load_config(os.environ)
    except ConfigError as error:
        log.critical("%s", error)
        return 1
    return process.run(serve_until_signalled(config, os.environ))


async def serve_until_signalled(config: GatewayConfig, environ: Mapping[str, str]) -> int:
    server = GatewayServer(config, environ)
    try:
        await server.start()
    except (ValueError, OSError, UntestedHypercorn) as error:
        log.critical("%s", error)
        return 1
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
