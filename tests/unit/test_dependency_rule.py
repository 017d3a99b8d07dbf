"""The dependency rule over the real import graph of every distribution's source.

core imports only the standard library, pydantic, pluggy and PyYAML (for the one bounded reader
of manifest YAML); k8s and gateway never import each other; fetch (model delivery) imports only
the core; local mode imports the core, the gateway and fetch, and nothing imports local mode; the
gateway speaks gRPC without grpcio or protobuf; no distribution imports another's private name (a
module or name beginning with `_`); vendor plugins import only the core (and pluggy); vendors are
reached only through entry points; nothing imports `tests`. Every import counts: relative ones,
`from x import y`, imports inside functions or `TYPE_CHECKING` blocks, and
`importlib.import_module("literal")`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STDLIB = frozenset(sys.stdlib_module_names)
CORE, K8S, GATEWAY, FETCH = "noctaya.core", "noctaya.k8s", "noctaya.gateway", "noctaya.fetch"
LOCAL = "noctaya.local"
VENDOR_PREFIX = "noctaya.vendor_"
THIRD_PARTY_ALLOWED = {
    CORE: {"pydantic", "pydantic_core", "pluggy", "yaml"},
    "vendor": {"pluggy"},
}
THIRD_PARTY_FORBIDDEN = {GATEWAY: {"grpc", "google"}}
"""The gateway's scaler writes gRPC and protobuf itself (`noctaya.gateway.scaler`)."""


@dataclass(frozen=True)
class Import:
    name: str
    line: int


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def layer_of(module: str) -> str | None:
    """`noctaya.<sub>` for a Noctaya module; None for anything else (and the bare namespace)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "noctaya" and len(parts) > 1 else None


def is_known_layer(layer: str | None) -> bool:
    return layer in {CORE, K8S, GATEWAY, FETCH, LOCAL} or (layer or "").startswith(VENDOR_PREFIX)


def source_modules() -> list[Module]:
    modules = []
    for path in sorted(REPO.glob("packages/*/src/**/*.py")):
        src = next(parent for parent in path.parents if parent.name == "src")
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules.append(Module(".".join(parts), path, is_package))
    return modules


def imports_of(source: str, module: str, *, is_package: bool) -> Iterator[Import]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (Import(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            yield Import(base, node.lineno)
            # `from noctaya import gateway` imports noctaya.gateway, not just the namespace.
            yield from (
                Import(f"{base}.{alias.name}", node.lineno)
                for alias in node.names
                if alias.name != "*"
            )
        elif (
            isinstance(node, ast.Call)
            and _called_name(node.func) in {"import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield Import(node.args[0].value, node.lineno)


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    assert level - 1 < len(parts), f"relative import beyond the top level in {package}"
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def why_forbidden(importer: str, imported: str) -> str | None:
    """The rule `importer` breaks by importing `imported`, or None when it is allowed."""
    top = imported.split(".")[0]
    own, target = layer_of(importer), layer_of(imported)
    vendor = bool(own and own.startswith(VENDOR_PREFIX))
    if top == "tests":
        return "nothing imports tests"
    if top in STDLIB or target == own or (top == "noctaya" and target is None):
        return None
    if target and target.startswith(VENDOR_PREFIX):
        return "vendor plugins are reached only through the noctaya.vendors entry points"
    if top != "noctaya":
        if top in THIRD_PARTY_FORBIDDEN.get(own or "", ()):
            return "noctaya.gateway speaks gRPC without grpcio or protobuf"
        allowed = THIRD_PARTY_ALLOWED.get("vendor" if vendor else own or "")
        if allowed is None or top in allowed:
            return None
        if vendor:
            return "vendor plugins import only the standard library, pluggy and noctaya.core"
        return "noctaya.core imports only the standard library, pydantic, pluggy and PyYAML"
    if own == CORE:
        return "noctaya.core imports no other Noctaya package"
    if _is_private(imported):
        return f"a private name of {target} is not for {own}"
    if target == LOCAL:
        return "nothing imports noctaya.local"
    if own == LOCAL and target not in {CORE, GATEWAY, FETCH}:
        return "noctaya.local imports only noctaya.core, noctaya.gateway and noctaya.fetch"
    if vendor and target != CORE:
        return "vendor plugins import only noctaya.core"
    if {own, target} == {K8S, GATEWAY}:
        return "noctaya.k8s and noctaya.gateway never import each other"
    if own == FETCH and target != CORE:
        return "noctaya.fetch imports only noctaya.core"
    return None


def _is_private(imported: str) -> bool:
    return any(p.startswith("_") and not p.endswith("__") for p in imported.split(".")[2:])


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    return [
        f"{module}:{found.line} imports {found.name}: {reason}"
        for found in imports_of(source, module, is_package=is_package)
        if (reason := why_forbidden(module, found.name))
    ]


def test_every_source_module_belongs_to_a_known_layer() -> None:
    modules = source_modules()
    layers = {layer_of(module.name) for module in modules}

    assert [m.name for m in modules if not is_known_layer(layer_of(m.name))] == []
    assert {CORE, K8S, GATEWAY, LOCAL, "noctaya.vendor_nvidia", "noctaya.vendor_ascend"} <= layers


def test_import_graph_obeys_the_dependency_rule() -> None:
    found = [
        violation
        for module in source_modules()
        for violation in violations(
            module.name, module.path.read_text(encoding="utf-8"), is_package=module.is_package
        )
    ]

    assert found == []


@pytest.mark.parametrize(
    ("module", "source", "rule"),
    [
        ("noctaya.core.plan", "def f():\n    import kubernetes\n", "noctaya.core imports only"),
        ("noctaya.core.plan", "from noctaya.k8s import render\n", "no other Noctaya package"),
        ("noctaya.core.sub.plan", "from ...gateway import proxy\n", "no other Noctaya package"),
        ("noctaya.core.plan", "from httpx import Client\n", "noctaya.core imports only"),
        ("noctaya.k8s.render", "from noctaya import gateway\n", "never import each other"),
        ("noctaya.gateway.requests.proxy", "import noctaya.k8s.cli\n", "never import each other"),
        (
            "noctaya.k8s.cli",
            "import importlib\nimportlib.import_module('noctaya.gateway.process.cli')\n",
            "never import each other",
        ),
        ("noctaya.k8s.render", "from noctaya.vendor_nvidia import NvidiaAdapter\n", "entry points"),
        ("noctaya.vendor_x.adapter", "import httpx\n", "vendor plugins import only the standard"),
        ("noctaya.vendor_x.adapter", "from noctaya.gateway import x\n", "import only noctaya.core"),
        ("noctaya.vendor_x", "from noctaya.vendor_nvidia import adapter\n", "entry points"),
        ("noctaya.gateway.app", "from tests.support import envtest\n", "nothing imports tests"),
        ("noctaya.fetch.oci", "from noctaya.k8s import render\n", "noctaya.fetch imports only"),
        ("noctaya.gateway.app", "from noctaya.local import cli\n", "nothing imports noctaya.local"),
        ("noctaya.k8s.cli", "import noctaya.local.cli\n", "nothing imports noctaya.local"),
        ("noctaya.local.plan", "from noctaya.k8s import render\n", "noctaya.local imports only"),
        ("noctaya.local.x", "from noctaya.gateway.scaler import _proto\n", "private name"),
        ("noctaya.local.x", "from noctaya.gateway.app import _helper\n", "private name"),
        ("noctaya.k8s.x", "import noctaya.fetch._internal\n", "private name"),
        ("noctaya.gateway.scaler.x", "import grpc\n", "without grpcio or protobuf"),
        ("noctaya.gateway.scaler.x", "from google.protobuf import message\n", "without grpcio"),
        (
            "noctaya.core.plan",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kubernetes\n",
            "noctaya.core imports only",
        ),
    ],
)
def test_checker_reports_a_synthetic_violation(module: str, source: str, rule: str) -> None:
    found = violations(module, source)

    assert len(found) >= 1
    assert all(rule in violation for violation in found), found


@pytest.mark.parametrize(
    ("module", "source", "is_package"),
    [
        ("noctaya.core.plan", "from __future__ import annotations\nimport json\n", False),
        ("noctaya.core.plan", "from pydantic import BaseModel\nimport pydantic_core\n", False),
        ("noctaya.core.api.yaml_documents", "import yaml\n", False),
        ("noctaya.core.plan", "from .values import Duration\nfrom . import errors\n", False),
        ("noctaya.core", "from .values import Duration\n", True),
        ("noctaya.core.values.x", "from ..errors import NoctayaError\n", False),
        ("noctaya.vendor_x", "import pluggy\nfrom noctaya.core.plugins import hookimpl\n", True),
        ("noctaya.k8s.render", "import kubernetes\nfrom noctaya.core import plugins\n", False),
        ("noctaya.gateway.app", "from noctaya.gateway import auth\nimport yaml\n", False),
        ("noctaya.gateway.app", "from noctaya.gateway.scaler import _wire\n", False),
        ("noctaya.local.x", "import grpc\nfrom noctaya.gateway.requests import app\n", False),
        (
            "noctaya.local.x",
            "from noctaya.fetch.cli import main\nfrom noctaya.core import api\n",
            False,
        ),
    ],
)
def test_checker_allows_what_the_rule_allows(module: str, source: str, is_package: bool) -> None:
    assert violations(module, source, is_package=is_package) == []


def test_the_gateway_distribution_requires_neither_grpcio_nor_protobuf() -> None:
    import tomllib

    project = tomllib.loads((REPO / "packages/noctaya-gateway/pyproject.toml").read_text())
    required = {
        re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] for r in project["project"]["dependencies"]
    }

    assert required.isdisjoint({"grpcio", "protobuf"}), required
