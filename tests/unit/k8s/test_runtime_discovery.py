"""Discovery against a server that accepts connections but never answers keeps its deadline."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from noctaya.k8s.runtime import ResourceKind, ResourceResolver
from noctaya.k8s.runtime.resources import DeadlineExceeded

UNKNOWN = ResourceKind("example.invalid/v1", "Nothing")  # never in a discovery cache
SLACK = 1.0  # scheduling delay a busy machine may add to any bound


@pytest.fixture
def silent_server() -> Iterator[tuple[int, threading.Event]]:
    """A loopback port that accepts connections and never answers; the event: one arrived."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    arrived = threading.Event()

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            arrived.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1], arrived
    listener.close()
    for connection in accepted:
        connection.close()


def _resolver(port: int) -> ResourceResolver:
    configuration = k8s.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = False
    return ResourceResolver(k8s.ApiClient(configuration))


def test_a_stalled_discovery_ends_at_its_deadline_and_its_waiters_at_theirs(
    silent_server: tuple[int, threading.Event],
) -> None:
    port, arrived = silent_server
    outcome: list[tuple[BaseException | None, float]] = []

    def discover() -> None:
        started = time.monotonic()
        try:
            _resolver(port).resolve(UNKNOWN, timeout=1.5)
        except Exception as error:
            outcome.append((error, time.monotonic() - started))
        else:
            outcome.append((None, time.monotonic() - started))

    holder = threading.Thread(target=discover)
    holder.start()
    try:
        assert arrived.wait(10), "the discovery never reached the server"
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="held the lock"):
            _resolver(port).resolve(UNKNOWN, timeout=0.3)
        waited = time.monotonic() - started
    finally:
        holder.join(10)
    assert not holder.is_alive(), "discovery outlived its deadline by far"
    assert 0.3 <= waited < 0.3 + SLACK, f"the waiter gave up after {waited:.2f}s"
    error, took = outcome[0]
    assert error is not None
    assert took < 1.5 + SLACK, f"the stalled discovery took {took:.2f}s"
