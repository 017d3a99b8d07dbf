"""Loopback ports for servers a test starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port free right now; callers retry if another process takes it first."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
