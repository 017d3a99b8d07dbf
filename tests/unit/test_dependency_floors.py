"""The version ranges the packages declare admit only releases the code works with.

A floor below what the code relies on installs fine and fails later, under load or at shutdown,
so each floor the code depends on is pinned here with the behaviour it needs.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from noctaya.gateway.server.tested_versions import TESTED_LINES, requirement_for
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[2]


def declared(package: str, dependency: str) -> SpecifierSet:
    """The version range `packages/<package>/pyproject.toml` declares for `dependency`."""
    with (REPO / "packages" / package / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    found = [
        requirement.specifier
        for requirement in map(Requirement, project["dependencies"])
        if requirement.name == dependency
    ]
    assert len(found) == 1, f"{package} declares {dependency} {len(found)} times"
    return found[0]


def test_kubernetes_is_the_tested_major_37_whose_watch_stop_shuts_the_socket() -> None:
    """`Informer.stop` returns promptly only because `Watch.stop` shuts down the socket of the
    open watch, which kubernetes 36.0.0 added; in 35 it only sets a flag, read after the next
    event, so stopping an informer on a quiet kind waits for the server's watch timeout. The
    operator subclasses the client's `DynamicClient`, and only 37 is tested."""
    allowed = declared("noctaya-k8s", "kubernetes")

    assert [allowed.contains(v) for v in ("36.99.99", "37.0.0", "37.99.99", "38.0.0")] == [
        False,
        True,
        True,
        False,
    ]


INTERNALS = [
    ("noctaya-core", "pyyaml", "6", "its SafeLoader subclassed for the manifest reader"),
    ("noctaya-k8s", "pyyaml", "6", "its SafeDumper subclassed for rendered manifests"),
    ("noctaya-k8s", "prometheus-client", "0.26", "metrics' _name and _labelnames, for the docs"),
    ("noctaya-fetch", "oras", "0.2", "Registry.do_request's __wrapped__ and auth._basic_auth"),
    ("noctaya-fetch", "urllib3", "2", "a response's _fp, read into one buffer"),
]
"""Dependencies whose internals the code relies on, the release line tested (a major, or for a
0.x release the minor, which may break as a major does), and what it relies on."""


@pytest.mark.parametrize(("package", "dependency", "line", "internals"), INTERNALS)
def test_a_dependency_whose_internals_are_used_is_bounded_to_the_tested_line(
    package: str, dependency: str, line: str, internals: str
) -> None:
    allowed = declared(package, dependency)
    parts = [int(part) for part in line.split(".")]
    below = ".".join(map(str, [*parts[:-1], parts[-1] - 1, 99])) if parts[-1] else None
    after = ".".join(map(str, [*parts[:-1], parts[-1] + 1]))

    assert allowed.contains(importlib.metadata.version(dependency)), "the installed one"
    assert allowed.contains(f"{line}.99"), internals
    assert not allowed.contains(after), internals
    if below is not None:
        assert not allowed.contains(below), internals


@pytest.mark.parametrize("library", sorted(TESTED_LINES))
def test_hypercorn_h2_and_h11_are_the_lines_the_server_patches_are_tested_with(
    library: str,
) -> None:
    """The gateway subclasses private methods of hypercorn, h2 and h11 (its server patches),
    which may change in any release: each declared range is exactly the tested line, the one
    the gateway checks at start-up."""
    allowed = declared("noctaya-gateway", library)

    assert allowed == Requirement(requirement_for(library)).specifier
    major, minor = TESTED_LINES[library]
    assert [
        allowed.contains(v)
        for v in (f"{major}.{minor - 1}.9", f"{major}.{minor}.0", f"{major}.{minor}.9")
    ] == [False, True, True]
    assert not allowed.contains(f"{major}.{minor + 1}.0")
