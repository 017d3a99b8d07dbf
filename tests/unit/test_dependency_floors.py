"""The version ranges the packages declare admit only releases the code works with.

A floor below what the code relies on installs fine and fails later, under load or at shutdown,
so each floor the code depends on is pinned here with the behaviour it needs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from noctaya.gateway.tested_versions import TESTED_LINES, requirement_for
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
