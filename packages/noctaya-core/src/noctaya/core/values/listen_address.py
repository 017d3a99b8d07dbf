"""Listen addresses (`:8080`, `127.0.0.1:8080`, `[::1]:8080`) split into host and port.

An empty host means every interface; IPv6 literals are bracketed. The operator's bind-address
flags and the gateway's `NOCTAYA_*` addresses take the reference's values unchanged, so this
reads them as Go's `net.SplitHostPort` does, on purpose; for the operator's flags that includes
any bracketed host, even an empty one. Each caller words its own errors, so a failure carries
the problem as well as a message.
"""

from __future__ import annotations

import enum


class AddressProblem(enum.Enum):
    MISSING_PORT = "missing port"
    UNBALANCED_BRACKETS = "unbalanced brackets"
    BRACKETS_NEED_IPV6 = "brackets need an IPv6 address"
    IPV6_NEEDS_BRACKETS = "IPv6 address needs brackets"
    PORT_NOT_A_NUMBER = "port must be a number"
    PORT_OUT_OF_RANGE = "port out of range"


class ListenAddressError(ValueError):
    def __init__(self, text: str, problem: AddressProblem) -> None:
        super().__init__(f'invalid listen address "{text}": {problem.value}')
        self.problem = problem


def parse_listen_address(text: str, *, any_bracketed_host: bool = False) -> tuple[str, int]:
    """Split `text` into `(host, port)`; host `""` means all interfaces.

    Brackets must hold an IPv6 address unless `any_bracketed_host`, which accepts any bracketed
    host, even an empty one (the operator's flags: see the module docstring).
    Raise ListenAddressError naming the problem.
    """
    if not isinstance(text, str):
        raise ValueError(f"invalid listen address {text!r}: not a string")
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ListenAddressError(text, AddressProblem.MISSING_PORT)
    if host.startswith("["):
        if not host.endswith("]"):
            raise ListenAddressError(text, AddressProblem.UNBALANCED_BRACKETS)
        host = host[1:-1]
        if not any_bracketed_host and not host:
            raise ListenAddressError(text, AddressProblem.UNBALANCED_BRACKETS)
        if not any_bracketed_host and ":" not in host:
            raise ListenAddressError(text, AddressProblem.BRACKETS_NEED_IPV6)
    elif ":" in host:
        raise ListenAddressError(text, AddressProblem.IPV6_NEEDS_BRACKETS)
    elif "[" in host or "]" in host:
        raise ListenAddressError(text, AddressProblem.UNBALANCED_BRACKETS)
    if not port_text.isascii() or not port_text.isdigit():
        raise ListenAddressError(text, AddressProblem.PORT_NOT_A_NUMBER)
    port = int(port_text)
    if port > 65535:
        raise ListenAddressError(text, AddressProblem.PORT_OUT_OF_RANGE)
    return host, port
