"""The server patches override private methods of hypercorn, h2 and h11: on a release line they
were not tested with, they refuse to install, change nothing, and say what to install."""

from __future__ import annotations

import importlib.metadata

import hypercorn.protocol
import hypercorn.protocol.h2
import pytest
from hypercorn.asyncio.task_group import TaskGroup
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from noctaya.gateway.server import tested_versions
from noctaya.gateway.server.patches import head_timeout, http2, install_server_patches
from noctaya.gateway.server.tested_versions import (
    TESTED_LINES,
    UntestedServerLibrary,
    installed_version,
    requirement_for,
)

TESTED = {"hypercorn": "0.18.0", "h2": "4.4.1", "h11": "0.16.0"}


def _patched() -> tuple[object, ...]:
    return (
        vars(hypercorn.protocol)["H2Protocol"],
        vars(hypercorn.protocol)["H11Protocol"],
        hypercorn.protocol.h2.StreamBuffer,
        TCPServer._close,
        TCPServer._read_data,
        TCPServer.__init__,
        TCPServer.protocol_send,
        TaskGroup.spawn_app,
        WorkerContext.event_class,
    )


@pytest.mark.parametrize(
    ("library", "found", "line"),
    [
        ("hypercorn", "0.19.0", "hypercorn>=0.18,<0.19"),
        ("hypercorn", "0.17.3", "hypercorn>=0.18,<0.19"),
        ("hypercorn", "0.18rc1", "hypercorn>=0.18,<0.19"),
        ("h2", "4.5.0", "h2>=4.4,<4.5"),
        ("h2", "4.3.2", "h2>=4.4,<4.5"),
        ("h2", "5.0", "h2>=4.4,<4.5"),
        ("h11", "0.17.0", "h11>=0.16,<0.17"),
        ("h11", "0.15.0", "h11>=0.16,<0.17"),
        ("h11", "unknown", "h11>=0.16,<0.17"),
    ],
)
def test_patches_refuse_an_untested_release_and_change_nothing(
    monkeypatch: pytest.MonkeyPatch, library: str, found: str, line: str
) -> None:
    monkeypatch.setattr(tested_versions, "installed_versions", lambda: {**TESTED, library: found})
    before = _patched()
    with pytest.raises(UntestedServerLibrary) as raised:
        install_server_patches()
    assert str(raised.value) == (
        f"{library} {found} is installed, but the gateway's server patches are tested only with "
        f"{line}; install a version in that range"
    )
    assert _patched() == before


@pytest.mark.parametrize("patch_release", ["0", "9"])
def test_patches_install_on_any_patch_release_of_the_tested_lines(
    monkeypatch: pytest.MonkeyPatch, patch_release: str
) -> None:
    releases = {
        name: f"{major}.{minor}.{patch_release}" for name, (major, minor) in TESTED_LINES.items()
    }
    monkeypatch.setattr(tested_versions, "installed_versions", lambda: releases)
    install_server_patches()
    assert vars(hypercorn.protocol)["H2Protocol"] is http2.GatewayH2Protocol
    assert vars(hypercorn.protocol)["H11Protocol"] is head_timeout.GatewayH11Protocol


@pytest.mark.parametrize(
    "distribution", ["hypercorn", "h2", "h11", "noctaya-gateway", "noctaya_core"]
)
def test_installed_versions_are_read_as_importlib_metadata_reads_them(distribution: str) -> None:
    assert installed_version(distribution) == importlib.metadata.version(distribution)


def test_a_distribution_not_installed_has_no_version() -> None:
    assert installed_version("noctaya-no-such-distribution") is None


def test_the_installed_releases_are_the_tested_ones() -> None:
    """The lock file pins releases on the tested lines: a bump off them fails here first."""
    assert tested_versions.installed_versions() == TESTED
    assert [requirement_for(name) for name in TESTED_LINES] == [
        "hypercorn>=0.18,<0.19",
        "h2>=4.4,<4.5",
        "h11>=0.16,<0.17",
    ]
