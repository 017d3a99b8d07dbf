"""Durations as the API writes them: users write `5m`, the operator renders `5m0s`, and both
must mean the same.

The API's durations are Go's (the CRD reference), so on purpose parsing accepts what Go's
`time.ParseDuration` accepts, with its error wording, and printing gives what its
`Duration.String()` gives: env vars and messages read as the reference's do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from noctaya.core.values.go_text import go_quote

if TYPE_CHECKING:  # pydantic is imported only by whoever validates models with this type
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import core_schema

_UNITS_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_COMPONENT = re.compile(r"(?P<number>[0-9]*(?:\.[0-9]*)?)(?P<unit>[^0-9.]*)")
_MAX_NS = 2**63 - 1
NANOSECOND = 1
SECOND = 1_000_000_000


@dataclass(frozen=True, order=True)
class Duration:
    """A signed span of nanoseconds that fits in 64 bits (about 292 years either way)."""

    nanoseconds: int

    @classmethod
    def parse(cls, text: str) -> Duration:
        """Parse duration syntax (`300ms`, `1.5s`, `1h30m`, `-1s`); raise ValueError otherwise,
        worded `time: invalid duration "..."` and the like (see the module docstring).
        """
        if not isinstance(text, str):
            raise ValueError(f"invalid duration {text!r}: not a string")
        rest = text
        negative = rest[:1] == "-"
        if rest[:1] in ("-", "+"):
            rest = rest[1:]
        if rest == "0":
            return cls(0)
        if not rest:
            raise ValueError(f"time: invalid duration {go_quote(text)}")
        total = 0
        while rest:
            value, rest = _leading_component(rest, text)
            total += value
            if total > _MAX_NS + negative:
                raise ValueError(f"time: invalid duration {go_quote(text)}")
        return cls(-total if negative else total)

    @classmethod
    def of_seconds(cls, seconds: float) -> Duration:
        return cls(round(seconds * SECOND))

    @property
    def seconds(self) -> float:
        return self.nanoseconds / SECOND

    def ceil_seconds(self) -> int:
        """Whole seconds rounded up, as used for preStop sleeps (1.5s → 2)."""
        return math.ceil(self.nanoseconds / SECOND)

    def is_whole_seconds(self) -> bool:
        return self.nanoseconds % SECOND == 0

    def __str__(self) -> str:
        return format_go_duration(self.nanoseconds)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from noctaya.core.values.text_form import text_form_schema

        def validate(value: Any) -> Duration:
            if isinstance(value, Duration):
                return value
            return cls.parse(value)

        return text_form_schema(validate)


def positive_duration(text: str) -> Duration:
    """A duration above zero (`90s`, `10m`); ValueError for anything else."""
    value = Duration.parse(text)
    if value.nanoseconds <= 0:
        raise ValueError(f"time: duration {go_quote(text)} is not positive")
    return value


def _leading_component(rest: str, original: str) -> tuple[int, str]:
    """One `<number><unit>` component of `rest` in nanoseconds, and what follows it."""
    match = _COMPONENT.match(rest)
    assert match is not None  # every part of the pattern is optional
    if match.group("number") in ("", "."):
        raise ValueError(f"time: invalid duration {go_quote(original)}")
    unit = match.group("unit")
    if not unit:
        raise ValueError(f"time: missing unit in duration {go_quote(original)}")
    if unit not in _UNITS_NS:
        raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {go_quote(original)}")
    whole, _, frac = match.group("number").partition(".")
    scale = _UNITS_NS[unit]
    value = int(whole or "0") * scale
    if frac:
        value += int(frac) * scale // 10 ** len(frac)
    return value, rest[match.end() :]


def _fraction(value: int, digits: int) -> str:
    """`value` scaled down by 10**digits, printed with trailing zeros dropped."""
    whole, frac = divmod(value, 10**digits)
    frac_text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{frac_text}" if frac_text else str(whole)


def format_go_duration(nanoseconds: int) -> str:
    """The canonical text of a duration: `0s`, `1.5ms`, `10s`, `5m0s`, `1h30m0s`."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < SECOND:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_fraction(u, 3)}µs"
        return f"{sign}{_fraction(u, 6)}ms"
    seconds = _fraction(u % (60 * SECOND), 9)
    minutes_total = u // (60 * SECOND)
    if minutes_total == 0:
        return f"{sign}{seconds}s"
    hours, minutes = divmod(minutes_total, 60)
    if hours == 0:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{hours}h{minutes}m{seconds}s"
