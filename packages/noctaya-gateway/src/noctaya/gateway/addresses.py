"""Binding what a Go-form listen address (`noctaya.core.values.listen_address`) names.

The address is in Go's `net.Listen` form, as the operator renders it: an empty host means every
interface, IPv6 literals are bracketed.
"""

from __future__ import annotations

from noctaya.core.values.listen_address import parse_listen_address

ALL_INTERFACES = ""


def format_bind(host: str, port: int) -> str:
    """`host:port` as a server bind string; the all-interfaces host binds dual-stack `[::]`."""
    if host == ALL_INTERFACES:
        return f"[::]:{port}"
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def with_port(listen_addr: str, port: int) -> str:
    """`listen_addr` with its port replaced by the bound one (what port 0 turned into)."""
    host, _ = parse_listen_address(listen_addr)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
