"""The version ranges the packages declare admit only releases the code works with.

A floor below what the code relies on installs fine and fails later, under load or at shutdown,
so each floor the code depends on is pinned here with the behaviour it needs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from noctaya.gateway.hypercorn_version import TESTED_RANGE
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


def test_kubernetes_floor_is_36_whose_watch_stop_shuts_the_socket_informers_need() -> None:
    """`Informer.stop` returns promptly only because `Watch.stop` shuts down the socket of the
    open watch, which kubernetes 36.0.0 added; in 35 it only sets a flag, read after the next
    event, so stopping an informer on a quiet kind waits for the server's watch timeout."""
    allowed = declared("noctaya-k8s", "kubernetes")

    assert not allowed.contains("35.99.99")
    assert allowed.contains("36.0.0")


def test_hypercorn_is_the_018_line_the_gateway_protocol_patches_are_tested_with() -> None:
    """The gateway subclasses private hypercorn methods (HTTP/2 and HTTP/1.1 protocol patches),
    which may change in any release: the declared range is exactly the tested line, the one the
    gateway checks at start-up."""
    allowed = declared("noctaya-gateway", "hypercorn")

    assert allowed == Requirement(TESTED_RANGE).specifier
    assert [allowed.contains(v) for v in ("0.17.3", "0.18.0", "0.18.9", "0.19.0")] == [
        False,
        True,
        True,
        False,
    ]
