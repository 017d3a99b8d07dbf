"""`noctaya-local FILE_OR_DIR…`: serve every LLMService of the files on this machine, behind one
endpoint, scaling each engine to zero and taking turns on the machine's devices.

Exit codes: 0 after SIGINT/SIGTERM, 2 for files or flags local mode cannot serve (the message
names the file and field), 1 when serving fails to start (a port another service or program
uses, a gateway that does not start).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.core.values.duration import Duration
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.local import console
from noctaya.local.admission import AdmissionSettings, admit
from noctaya.local.annotations import LISTEN_ANNOTATION, PINNED_ANNOTATION
from noctaya.local.command import LOCAL_COMMAND_ANNOTATION
from noctaya.local.devices import DeviceFlag, MachineDevices, parse_device_flag
from noctaya.local.engine_logs import default_folder
from noctaya.local.errors import LocalConfigError, LocalRunError, one_line
from noctaya.local.live_files import ServedFiles
from noctaya.local.model_fetch import default_cache
from noctaya.local.runner import RunOptions, run_local
from noctaya.local.swaps import DEFAULT_MIN_RESIDENCY

log = logging.getLogger("noctaya.local")
DEFAULT_LISTEN = "127.0.0.1:8080"
EXIT_INVALID = 2

DESCRIPTION = f"""\
Serve every LLMService in FILE_OR_DIR (YAML files with services and the InferenceRuntimes they
run on; a folder stands for the *.yaml and *.yml files in it) on this machine, behind one
OpenAI-compatible endpoint that routes each request by its "model": the Noctaya gateway of each
service in front of its local engine process, which starts on demand and stops after
scaling.scaleDownStabilization without demand.

Engines take turns on the machine's devices (--devices, or as the vendor plugin lists them):
one that needs devices held by idle engines stops the least recently used first, never one that
serves or holds requests, and not before its --min-residency. The files are watched: a file
added, changed or removed applies to its services only; a bad edit is refused.

The runtime names the command that stands in for its container image in the annotation
{LOCAL_COMMAND_ANNOTATION} (e.g. "vllm serve" or "noctaya-engine-stub"); the engine listens on
127.0.0.1 at the runtime's spec.container.port.containerPort. A service may carry
{PINNED_ANNOTATION}: "true" (never swapped out) and {LISTEN_ANNOTATION}: HOST:PORT (an endpoint
of its own). A model the operator would stage with a Job (an oci:// artifact, or a hub model
with spec.cache.prewarm) is first fetched into --cache by noctaya-fetch."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    flags = _checked_flags(parser, args)
    try:
        files = ServedFiles(args.paths)
        manifests = files.read_all()
        settings = _admission_settings(args, flags.devices)
        admit(manifests, settings, {})  # everything checked before anything starts
    except (LocalConfigError, NoctayaError) as error:
        print(f"noctaya-local: {one_line(str(error))}", file=sys.stderr)
        return EXIT_INVALID
    options = RunOptions(settings, args.logs, args.cache, flags.min_residency)
    configure_logging()
    try:
        return asyncio.run(run_local(files, manifests, options, os.environ))
    except LocalRunError as error:
        log.error("%s", one_line(str(error)))
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="noctaya-local",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="FILE_OR_DIR", help="manifest files or folders"
    )
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"the endpoint's HTTP address, host:port (default {DEFAULT_LISTEN}; port 0 picks one)",
    )
    parser.add_argument(
        "--devices",
        action="append",
        default=[],
        metavar="[VENDOR=]IDS",
        help="the devices engines may use, as the vendor's variable names them (0,1 or "
        "GPU-<uuid>; repeat with VENDOR= for several vendors); default: as the vendor plugin "
        "lists them (nvidia-smi -L, npu-smi info -m), else not budgeted",
    )
    parser.add_argument(
        "--min-residency",
        default=f"{DEFAULT_MIN_RESIDENCY:g}s",
        metavar="DURATION",
        help="how long an engine keeps its devices after it became ready, whoever waits "
        f"(default {DEFAULT_MIN_RESIDENCY:g}s)",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        default=default_folder(os.environ),
        help="folder of each service's engine and gateway log (<service>.log); default "
        "$XDG_STATE_HOME/noctaya/local/logs or ~/.local/state/noctaya/local/logs",
    )
    parser.add_argument(
        "--api-key-file",
        help="file holding the client API key (required when a service sets "
        "endpoint.authentication; clients send it as a Bearer token)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=default_cache(os.environ),
        help="folder a model is fetched into when its service stages it (an oci:// model, or "
        "spec.cache.prewarm); default $XDG_CACHE_HOME/noctaya/models or ~/.cache/noctaya/models",
    )
    parser.add_argument(
        "--registry-config",
        help="dockerconfigjson file with the OCI registry's credentials (required when a "
        "model's source sets secretRef)",
    )
    return parser


@dataclass(frozen=True)
class _Flags:
    devices: list[DeviceFlag]
    min_residency: float


def _checked_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> _Flags:
    """The flags whose values have a form of their own, parsed; a wrong one exits 2 naming it."""
    try:
        parse_listen_address(args.listen)
    except ValueError as error:
        parser.error(f"--listen: {error}")
    try:
        devices = [parse_device_flag(text) for text in args.devices]
    except ValueError as error:
        parser.error(f"--devices: {error}")
    try:
        residency = Duration.parse(args.min_residency).seconds
    except ValueError as error:
        parser.error(f"--min-residency: {error}")
    return _Flags(devices, max(0.0, residency))


def _admission_settings(args: argparse.Namespace, devices: list[DeviceFlag]) -> AdmissionSettings:
    vendors = VendorRegistry.discover()
    return AdmissionSettings(
        listen=args.listen,
        vendors=vendors,
        devices=MachineDevices(devices, vendors),
        environ=os.environ,
        api_key_file=args.api_key_file,
        registry_config=args.registry_config,
    )


def configure_logging() -> None:
    """The gateway's line format, tagged like the relayed `[svc gateway]` and `[svc engine]`
    lines; hypercorn's own messages about the endpoint go the same way."""
    handler = console.ConsoleHandler()
    handler.setFormatter(
        logging.Formatter("[local] %(asctime)s %(message)s", datefmt="%Y/%m/%d %H:%M:%S")
    )
    for name in ("noctaya.local", "noctaya.gateway.http"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
