"""Each `noctaya-gateway` mode imports what it needs and nothing else: idle RSS is mostly
imported code, so a stray import (the aggregator pulling in the proxy stack, the gateway pulling
in the aggregator or the API models) shows up as memory in every replica.

Each check imports a mode's entry module in a fresh interpreter, as `noctaya-gateway` does, and
reads `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from noctaya.gateway.process.cli import MODE_ENTRIES

LIST_MODULES = (
    "import importlib, json, sys\n"
    "from noctaya.gateway.process.cli import MODE_ENTRIES, load_entry\n"
    "entry = sys.argv[1] in MODE_ENTRIES.values()\n"
    "(load_entry if entry else importlib.import_module)(sys.argv[1])\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)
API_MODELS = ("pydantic", "pydantic_core", "noctaya.core.api", "noctaya.core.ports")
NOT_SERVING = ("prometheus_client", "importlib.metadata", "decimal", "argparse")
"""What a serving process need not hold: the metrics client's 48 modules (`exposition` serves
the text format), the metadata reader's email and zipfile modules (`tested_versions` reads the
versions it needs), `decimal` (only for a body limit given as a quantity) and argparse (only
for a command line the operator does not render)."""
HTTP_SERVER = ("hypercorn", "h2")  # the gateway's and the scaler's
UNUSED_BY_HYPERCORN = ("multiprocessing", "logging.config", "tomllib", "tempfile")
"""What hypercorn loads for options no mode sets (`server.lean_import`)."""
PROXY_STACK = (
    "noctaya.gateway.process.gateway_server",
    "noctaya.gateway.requests.app",
    "noctaya.gateway.requests.proxy",
    "noctaya.gateway.process.config",
    "noctaya.gateway.upstream",
)
SCALER_STACK = ("noctaya.gateway.scaler",)  # imported when the scaler starts, not before
GRPC_RUNTIME = (
    "grpc",
    "google.protobuf",
)  # the scaler speaks gRPC without them; local mode's client
REPORTER_STACK = ("noctaya.gateway.demand.reporter",)  # only with several gateways
AGGREGATOR = ("noctaya.gateway.aggregator",)


def imported_by(module: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", LIST_MODULES, module],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(json.loads(result.stdout))


def present(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == package or name.startswith(package + ".") for package in packages)
    )


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        (
            "noctaya.gateway.process.cli",
            API_MODELS
            + HTTP_SERVER
            + PROXY_STACK
            + SCALER_STACK
            + GRPC_RUNTIME
            + REPORTER_STACK
            + AGGREGATOR
            + NOT_SERVING,
        ),
        (
            MODE_ENTRIES["gateway"],
            API_MODELS
            + SCALER_STACK
            + GRPC_RUNTIME
            + REPORTER_STACK
            + AGGREGATOR
            + NOT_SERVING
            + UNUSED_BY_HYPERCORN,
        ),
        (
            "noctaya.gateway.scaler.server",
            API_MODELS + PROXY_STACK + GRPC_RUNTIME + AGGREGATOR + NOT_SERVING,
        ),
        (
            MODE_ENTRIES["aggregator"],
            API_MODELS
            + PROXY_STACK
            + GRPC_RUNTIME
            + REPORTER_STACK
            + NOT_SERVING
            + UNUSED_BY_HYPERCORN,
        ),
    ],
    ids=["cli", "gateway", "gateway-scaler", "aggregator"],
)
def test_a_mode_imports_only_what_it_needs(module: str, absent: tuple[str, ...]) -> None:
    assert present(imported_by(module), absent) == []


@pytest.mark.parametrize(
    ("module", "needed"),
    [
        (
            MODE_ENTRIES["gateway"],
            (
                "hypercorn",
                "noctaya.gateway.requests.proxy",
                "noctaya.gateway.metrics.gateway_metrics",
            ),
        ),
        (
            MODE_ENTRIES["aggregator"],
            ("noctaya.gateway.scaler.grpc_app", "h11", "noctaya.gateway.aggregator.server"),
        ),
    ],
    ids=["gateway", "aggregator"],
)
def test_a_mode_entry_imports_its_own_stack(module: str, needed: tuple[str, ...]) -> None:
    """The absent-checks above are only meaningful if each entry loads its own stack."""
    modules = imported_by(module)

    assert [package for package in needed if not present(modules, (package,))] == []
