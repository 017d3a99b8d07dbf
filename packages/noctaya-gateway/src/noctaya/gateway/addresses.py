"""Go-form listen addresses (`:8080`, `127.0.0.1:8080`, `[::1]:8080`), as the operator renders them.

The same env values configure the Go reference and this implementation, so the parsing follows
Go's `net.SplitHostPort`: an empty host means every interface, IPv6 literals are bracketed.
"""

from __future__ import annotations

ALL_INTERFACES = ""


def parse_listen_addr(text: str) -> tuple[str, int]:
    """Split `text` into `(host, port)`; host `""` means all interfaces. Raise ValueError if bad."""
    if not isinstance(text, str):
        raise ValueError(f"invalid listen address {text!r}: not a string")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f'invalid listen address "{text}": missing port')
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise ValueError(f'invalid listen address "{text}": unbalanced brackets')
        host = host[1:-1]
        if ":" not in host:
            raise ValueError(f'invalid listen address "{text}": brackets need an IPv6 address')
    elif ":" in host:
        raise ValueError(f'invalid listen address "{text}": IPv6 address needs brackets')
    elif "[" in host or "]" in host:
        raise ValueError(f'invalid listen address "{text}": unbalanced brackets')
    if not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f'invalid listen address "{text}": port must be a number')
    port = int(port_text)
    if port > 65535:
        raise ValueError(f'invalid listen address "{text}": port out of range')
    return host, port


def format_bind(host: str, port: int) -> str:
    """`host:port` as a server bind string; the all-interfaces host binds dual-stack `[::]`."""
    if host == ALL_INTERFACES:
        return f"[::]:{port}"
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def with_port(listen_addr: str, port: int) -> str:
    """`listen_addr` with its port replaced by the bound one (what port 0 turned into)."""
    host, _ = parse_listen_addr(listen_addr)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
