"""What both modes' settings share: the listen addresses' check and the error that stops
startup. Apart from the gateway's own settings (`config`), so that the aggregator's
(`aggregator.config`) loads nothing of the proxy."""

from __future__ import annotations

from collections.abc import Mapping

from noctaya.core.values.listen_address import parse_listen_address

DEFAULT_SCALER_LISTEN_ADDR = ":9090"


class ConfigError(ValueError):
    """A setting that prevents startup; the message is what the process prints before exiting."""


def listen_addr_setting(environ: Mapping[str, str], name: str, default: str) -> str:
    """The listen address in `name` (`:8080`, `127.0.0.1:8080`; `default` if unset or empty),
    checked at startup."""
    value = environ.get(name) or default
    try:
        parse_listen_address(value)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    return value
