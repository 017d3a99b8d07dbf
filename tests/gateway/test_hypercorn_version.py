"""The protocol patches reach into hypercorn's private methods: on an untested hypercorn line they
refuse to install, with a message saying what to install."""

from __future__ import annotations

from collections.abc import Callable

import hypercorn.protocol
import hypercorn.protocol.h2
import pytest
from hypercorn.asyncio.task_group import TaskGroup
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from noctaya.gateway import (
    head_timeout,
    http2,
    hypercorn_version,
    receive_queue,
    response_writes,
    slim_connections,
)
from noctaya.gateway.hypercorn_version import UntestedHypercorn
from noctaya.gateway.server_patches import SERVER_PATCHES, install_server_patches


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


@pytest.mark.parametrize("found", ["0.19.0", "0.17.3", "1.0", "0.18rc1", "dev"])
@pytest.mark.parametrize(
    "install", SERVER_PATCHES, ids=lambda install: install.__module__.rpartition(".")[2]
)
def test_patches_refuse_an_untested_hypercorn_and_change_nothing(
    monkeypatch: pytest.MonkeyPatch, found: str, install: Callable[[], None]
) -> None:
    monkeypatch.setattr(hypercorn_version, "installed_hypercorn", lambda: found)
    before = _patched()
    with pytest.raises(UntestedHypercorn) as raised:
        install()
    assert str(raised.value) == (
        f"hypercorn {found} is installed, but the gateway's hypercorn patches are tested only with "
        "hypercorn>=0.18,<0.19; install a version in that range"
    )
    assert _patched() == before


@pytest.mark.parametrize("found", ["0.18.0", "0.18.7"])
def test_patches_install_on_the_tested_line(monkeypatch: pytest.MonkeyPatch, found: str) -> None:
    monkeypatch.setattr(hypercorn_version, "installed_hypercorn", lambda: found)
    install_server_patches()
    assert vars(hypercorn.protocol)["H2Protocol"] is http2.GatewayH2Protocol
    assert vars(hypercorn.protocol)["H11Protocol"] is head_timeout.GatewayH11Protocol
    assert TaskGroup.spawn_app is receive_queue._spawn_app
    assert WorkerContext.event_class is slim_connections.SlimEvent
    assert TCPServer.protocol_send is response_writes._send_unless_buffered
