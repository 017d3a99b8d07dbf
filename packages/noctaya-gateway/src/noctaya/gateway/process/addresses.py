"""What a listen address (`noctaya.core.values.listen_address`) names once bound.

The address is in the form the operator renders (`:8080`, `127.0.0.1:8080`, `[::1]:8080`): an
empty host means every interface, IPv6 literals are bracketed.
"""

from __future__ import annotations

from noctaya.core.values.listen_address import parse_listen_address


def with_port(listen_addr: str, port: int) -> str:
    """`listen_addr` with its port replaced by the bound one (what port 0 turned into)."""
    host, _ = parse_listen_address(listen_addr)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
