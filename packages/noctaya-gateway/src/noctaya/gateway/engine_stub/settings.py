"""The engine stub's `STUB_*` environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.values import Duration, Quantity
from noctaya.core.values.go_text import go_positive_int

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class StubSettings:
    listen_addr: str = ":8000"
    startup_delay: float = 0.0
    token_count: int = 1
    token_delay: float = 0.05
    memory: int = 0
    """Bytes written at start and held, as an engine holds its weights (STUB_MEMORY)."""
    exit_after: float | None = None
    """Seconds after start at which the stub exits 1, a start-up that fails (STUB_EXIT_AFTER)."""
    list_model: bool = False
    """Log every file of the `--model` directory at start, or exit 1 without one."""
    concurrency: int | None = None
    """Streams generated at once (STUB_CONCURRENCY); more wait for a free slot in arrival
    order, as requests queue in an engine's scheduler. Unset: no limit. Two pods given
    different values serve the same load at different speeds."""
    kv_cache_capacity: int | None = None
    """Streams in flight that fill the KV cache (STUB_KV_CACHE_CAPACITY): set, the KV-cache
    gauge follows them (in flight / capacity, at most 1) instead of `/control`. A pod gets its
    own from an annotation through the downward API (`fieldRef` `metadata.annotations[…]`), so
    pods of one Deployment can fill at different rates."""


def load_settings(environ: Mapping[str, str]) -> StubSettings:
    exit_after = environ.get("STUB_EXIT_AFTER", "")
    return StubSettings(
        listen_addr=environ.get("STUB_LISTEN_ADDR") or ":8000",
        startup_delay=_non_negative(environ, "STUB_STARTUP_DELAY", 0.0),
        token_count=_token_count(environ.get("STUB_TOKEN_COUNT", "")),
        token_delay=_non_negative(environ, "STUB_TOKEN_DELAY", 0.05),
        memory=_bytes(environ.get("STUB_MEMORY", "")),
        exit_after=_non_negative(environ, "STUB_EXIT_AFTER", 0.0) if exit_after else None,
        list_model=_boolean(environ, "STUB_LIST_MODEL"),
        concurrency=_capacity(environ, "STUB_CONCURRENCY"),
        kv_cache_capacity=_capacity(environ, "STUB_KV_CACHE_CAPACITY"),
    )


def _non_negative(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name, "")
    if not text:
        return default
    try:
        value = Duration.parse(text)
    except ValueError:
        value = Duration(-1)
    if value.nanoseconds < 0:
        raise SettingsError(f"{name} must be a non-negative duration")
    return value.seconds


def _capacity(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "")
    if not text:
        return None
    capacity = go_positive_int(text)
    if capacity is None:
        raise SettingsError(f"{name} must be a positive integer")
    return capacity


def _token_count(text: str) -> int:
    if not text:
        return 1
    count = go_positive_int(text)
    if count is None:
        raise SettingsError("STUB_TOKEN_COUNT must be a positive integer")
    return count


def _bytes(text: str) -> int:
    if not text:
        return 0
    try:
        value = Quantity.parse(text).value
    except ValueError:
        value = None
    if value is None or value < 0 or value != value.to_integral_value():
        raise SettingsError("STUB_MEMORY must be a whole number of bytes such as 256Mi")
    return int(value)


def _boolean(environ: Mapping[str, str], name: str) -> bool:
    text = environ.get(name, "")
    if text in _TRUE:
        return True
    if not text or text in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false")
