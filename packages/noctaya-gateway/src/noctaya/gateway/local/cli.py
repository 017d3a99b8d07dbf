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

from noctaya.core.errors import NoctayaError
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.local.command import LOCAL_COMMAND_ANNOTATION
from noctaya.gateway.local.errors import LocalConfigError, LocalRunError, one_line
from noctaya.gateway.local.manifest import LocalManifest, load_manifest
from noctaya.gateway.local.model_fetch import ModelFetch, default_cache, fetch_model, plan_fetch
from noctaya.gateway.local.plan import LocalPlan, local_plan, plan_local
from noctaya.gateway.local.port_claims import check_listen_port
from noctaya.gateway.local.runner import run_local
from noctaya.gateway.local.workloads import LocalService

log = logging.getLogger("noctaya.local")
DEFAULT_LISTEN = "127.0.0.1:8080"
EXIT_INVALID = 2

DESCRIPTION = f"""\
Serve the LLMService in FILE (a multi-document YAML with the service and its InferenceRuntime)
on this machine: the Noctaya gateway in front of one local engine process that starts on demand
and stops after scaling.scaleDownStabilization without demand. The runtime names the command
that stands in for its container image in the annotation {LOCAL_COMMAND_ANNOTATION}
(e.g. "vllm serve" or "noctaya-engine-stub"); the engine listens on 127.0.0.1 at the runtime's
spec.container.port.containerPort. A model the operator would stage with a Job (an oci://
artifact, or a hub model with spec.cache.prewarm) is first fetched into --cache by noctaya-fetch,
and the engine gets the fetched folder as {{{{ .Model.Path }}}}."""


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
    parser.add_argument(
        "--cache",
        type=Path,
        default=default_cache(os.environ),
        help="folder the model is fetched into when the service stages it (an oci:// model, or "
        "spec.cache.prewarm); default $XDG_CACHE_HOME/noctaya/models or ~/.cache/noctaya/models",
    )
    parser.add_argument(
        "--registry-config",
        help="dockerconfigjson file with the OCI registry's credentials (required when the "
        "model's source sets secretRef)",
    )
    args = parser.parse_args(argv)
    try:
        parse_listen_address(args.listen)
    except ValueError as error:
        parser.error(f"--listen: {error}")
    try:
        manifest = load_manifest(args.file)
        vendors = VendorRegistry.discover()
        plan = plan_local(manifest, api_key_file=args.api_key_file, vendors=vendors)
        fetch = plan_fetch(plan.serving, args.registry_config, os.environ)  # checked before
        check_listen_port(plan, args.listen)
    except (LocalConfigError, NoctayaError) as error:
        print(f"noctaya-local: {one_line(str(error))}", file=sys.stderr)
        return EXIT_INVALID
    configure_logging()
    try:
        return asyncio.run(_serve(plan, fetch, args, manifest, vendors))
    except LocalRunError as error:
        log.error("%s", one_line(str(error)))
        return 1


async def _serve(
    plan: LocalPlan,
    fetch: ModelFetch | None,
    args: argparse.Namespace,
    manifest: LocalManifest,
    vendors: VendorRegistry,
) -> int:
    if fetch is not None:
        model_path = await fetch_model(fetch, args.cache, os.environ)
        if model_path is None:
            return 0
        plan = plan_local(
            manifest, api_key_file=args.api_key_file, model_path=model_path, vendors=vendors
        )

    def translate(serving: ServingPlan) -> LocalService:
        mapped = local_plan(serving, manifest.runtimes, api_key_file=args.api_key_file)
        return LocalService(mapped, args.listen, source=str(args.file))

    return await run_local(plan.serving, translate, os.environ)


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
