"""The engine stub's `STUB_*` environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.values import Duration
from noctaya.core.values.go_text import go_positive_int


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class StubSettings:
    listen_addr: str = ":8000"
    startup_delay: float = 0.0
    token_count: int = 1
    token_delay: float = 0.05


def load_settings(environ: Mapping[str, str]) -> StubSettings:
    return StubSettings(
        listen_addr=environ.get("STUB_LISTEN_ADDR") or ":8000",
        startup_delay=_non_negative(environ, "STUB_STARTUP_DELAY", 0.0),
        token_count=_token_count(environ.get("STUB_TOKEN_COUNT", "")),
        token_delay=_non_negative(environ, "STUB_TOKEN_DELAY", 0.05),
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


def _token_count(text: str) -> int:
    if not text:
        return 1
    count = go_positive_int(text)
    if count is None:
        raise SettingsError("STUB_TOKEN_COUNT must be a positive integer")
    return count
