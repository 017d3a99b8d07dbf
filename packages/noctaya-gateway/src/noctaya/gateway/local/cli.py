"""`noctaya-local FILE.yaml`: serve one LLMService on this machine, scaling its engine to zero.

Exit codes: 0 after SIGINT/SIGTERM, 2 for a file or flags local mode cannot serve (the message
names the field), 1 when serving fails (a port another service or program uses, a gateway that
does not start).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.local.command import LOCAL_COMMAND_ANNOTATION
from noctaya.gateway.local.errors import LocalConfigError, LocalRunError, one_line
from noctaya.gateway.local.manifest import load_manifest
from noctaya.gateway.local.plan import plan_local
from noctaya.gateway.local.port_claims import check_listen_port
from noctaya.gateway.local.runner import run_local

log = logging.getLogger("noctaya.local")
DEFAULT_LISTEN = "127.0.0.1:8080"
EXIT_INVALID = 2

DESCRIPTION = f"""\
Serve the LLMService in FILE (a multi-document YAML with the service and its InferenceRuntime)
on this machine: the Noctaya gateway in front of one local engine process that starts on demand
and stops after scaling.scaleDownStabilization without demand. The runtime names the command
that stands in for its container image in the annotation {LOCAL_COMMAND_ANNOTATION}
(e.g. "vllm serve" or "noctaya-engine-stub"); the engine listens on 127.0.0.1 at the runtime's
spec.container.port.containerPort."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="noctaya-local",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", type=Path, help="LLMService + InferenceRuntime YAML")
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"gateway HTTP address, host:port (default {DEFAULT_LISTEN}; port 0 picks one)",
    )
    parser.add_argument(
        "--api-key-file",
        help="file holding the client API key (required when the service sets "
        "endpoint.authentication; clients send it as a Bearer token)",
    )
    args = parser.parse_args(argv)
    try:
        parse_listen_address(args.listen)
    except ValueError as error:
        parser.error(f"--listen: {error}")
    try:
        plan = plan_local(load_manifest(args.file), api_key_file=args.api_key_file)
        check_listen_port(plan, args.listen)
    except LocalConfigError as error:
        print(f"noctaya-local: {one_line(str(error))}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging()
    try:
        return asyncio.run(run_local(plan, args.listen, os.environ, source=str(args.file)))
    except LocalRunError as error:
        log.error("%s", one_line(str(error)))
        return 1


def configure_logging() -> None:
    """The gateway's line format, tagged like the relayed `[gateway]` and `[engine]` lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("[local] %(asctime)s %(message)s", datefmt="%Y/%m/%d %H:%M:%S")
    )
    logger = logging.getLogger("noctaya.local")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
