"""The listening socket of a server, bound before the server starts, and hypercorn serving it.

A failure to bind is worded as the reference implementation words it (`listen tcp :8080: bind:
address already in use`), one line that startup prints as it is.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config
from noctaya.core.values.listen_address import parse_listen_address


def listen_socket(listen_addr: str) -> socket.socket:
    """Bound and listening, so the port is known (port 0) and clients queue from this moment.

    Failures raise OSError worded `listen tcp <address>: bind: <reason>` (module docstring).
    """
    host, port = parse_listen_address(listen_addr)
    dualstack = host == "" and socket.has_dualstack_ipv6()
    family = socket.AF_INET6 if dualstack else socket.AF_INET
    address: tuple[str, int] = ("", port) if dualstack else ("0.0.0.0", port)
    if host:
        family, address = _resolved(host, port)
    try:
        sock = socket.create_server(address, family=family, dualstack_ipv6=dualstack, backlog=4096)
    except OSError as error:
        # create_server's own message adds "(while attempting to bind ...)"; the reason here is
        # the bare C library text, lower-case.
        reason = os.strerror(error.errno).lower() if error.errno else str(error)
        raise OSError(f"listen tcp {listen_addr}: bind: {reason}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _resolved(host: str, port: int) -> tuple[socket.AddressFamily, tuple[str, int]]:
    """An IP literal as it is (asking the resolver would load the IDNA codec, 0.4 MiB, to
    encode it), a name as the resolver gives it."""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return (socket.AF_INET6 if literal.version == 6 else socket.AF_INET), (host, port)
    try:
        family, *_, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        reason = "no such host" if error.errno == socket.EAI_NONAME else str(error.strerror)
        raise OSError(f"listen tcp: lookup {host}: {reason.lower()}") from None
    return family, (str(sockaddr[0]), port)


def serve_on(
    sock: socket.socket,
    app: Any,
    config: Config,
    shutdown_trigger: Callable[[], Awaitable[object]],
    *,
    plain: socket.socket | None = None,
) -> asyncio.Task[None]:
    """Serve `app` on `sock`, and on `plain` in plain HTTP even when `config` has TLS (hypercorn
    owns the descriptors from here), until `shutdown_trigger` returns and the graceful stop
    ends."""
    config.bind = [f"fd://{sock.fileno()}"]
    sock.detach()
    if plain is not None:
        bound = f"fd://{plain.fileno()}"
        plain.detach()
        if config.ssl_enabled:
            config.insecure_bind = [bound]
        else:
            config.bind = [*config.bind, bound]
    return asyncio.get_running_loop().create_task(
        serve(app, config, shutdown_trigger=shutdown_trigger)
    )
