"""Kubernetes `resource.Quantity`: `500m`, `32Gi`, `1e3`, printed in the canonical server form.

The canonical form matters because the API server rewrites quantities on write (`1.5Gi` reads
back as `1536Mi`); comparing rendered objects with live ones must use the same spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_UP, Decimal, localcontext
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is imported only by whoever validates models with this type
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import core_schema

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {0: ""} | {v: k for k, v in _BINARY.items()}
_PATTERN = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_NANO = Decimal("1e-9")
_MAX_INT64 = Decimal(2**63 - 1)
_LARGEST_SI_EXPONENT = 18
_MAX_EXPONENT = 1000  # far beyond any real amount; keeps absurd input cheap


class Format(Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True)
class Quantity:
    """An exact decimal amount (rounded up to nano units, as Kubernetes does) and its format."""

    value: Decimal
    format: Format

    @classmethod
    def parse(cls, text: str) -> Quantity:
        if not isinstance(text, str):
            raise ValueError(f"quantities must be strings, got {text!r}")
        match = _PATTERN.fullmatch(text)
        if match is None:
            raise ValueError(
                f'quantity "{text}" must match the regular expression '
                r"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        suffix = match.group("suffix") or ""
        number = Decimal(match.group("number"))
        with localcontext() as ctx:
            # exact arithmetic: the only rounding is Kubernetes' own, up to whole nano units
            ctx.prec, ctx.Emax, ctx.Emin = MAX_PREC, MAX_EMAX, MIN_EMIN
            if suffix in _BINARY:
                value, fmt = number * (Decimal(1024) ** _BINARY[suffix]), Format.BINARY_SI
            elif suffix in _DECIMAL:  # before exponents: a bare `E` means exa
                value, fmt = number.scaleb(_DECIMAL[suffix]), Format.DECIMAL_SI
            else:
                value, fmt = number.scaleb(_exponent(suffix, text)), Format.DECIMAL_EXPONENT
            if _decimal_exponent(value) < -9:
                value = value.quantize(_NANO, rounding=ROUND_UP)  # away from zero, as Kubernetes
            if fmt is Format.BINARY_SI and abs(value) > _MAX_INT64:
                value = _MAX_INT64.copy_sign(value)  # Kubernetes caps binary amounts at int64
            if value and value.adjusted() > _MAX_EXPONENT:
                raise ValueError(f'quantity "{text}" is too large')
        return cls(value.normalize() if value else Decimal(0), fmt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return canonical(self.value, self.format)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from noctaya.core.values.text_form import text_form_schema

        def validate(value: Any) -> Quantity:
            if isinstance(value, Quantity):
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            return cls.parse(value)

        return text_form_schema(validate)


def canonical(value: Decimal, fmt: Format) -> str:
    """The API server's canonical spelling of an amount in a format."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt is Format.BINARY_SI and magnitude >= 1024 and magnitude == magnitude.to_integral_value():
        amount, exponent = int(magnitude), 0
        while exponent < 6 and amount % 1024 == 0:
            amount, exponent = amount // 1024, exponent + 1
        return f"{sign}{amount}{_BINARY_SUFFIX[exponent]}"
    # Decimal forms: the integer mantissa with the largest exponent that is a multiple of three.
    mantissa, exponent = _integer_mantissa(magnitude)
    while exponent % 3 != 0:
        mantissa, exponent = mantissa * 10, exponent - 1
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent > _LARGEST_SI_EXPONENT:  # beyond `E` the mantissa absorbs the rest
        mantissa *= 10 ** (exponent - _LARGEST_SI_EXPONENT)
        exponent = _LARGEST_SI_EXPONENT
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _integer_mantissa(magnitude: Decimal) -> tuple[int, int]:
    """`magnitude` as `mantissa * 10**exponent` with no factor of ten left in the mantissa."""
    _, digits, exponent = magnitude.normalize().as_tuple()
    assert isinstance(exponent, int)
    return int("".join(map(str, digits))), exponent


def _decimal_exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return exponent


def _exponent(suffix: str, text: str) -> int:
    """The power of ten of an `e`/`E` suffix, bounded so a typo cannot allocate a huge number."""
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:
        raise ValueError(f'quantity "{text}" has an exponent beyond ±{_MAX_EXPONENT}')
    return exponent


MAX_BYTE_COUNT = 2**62
"""Beyond any body or buffer size, and a bound that keeps the arithmetic on it exact."""


def byte_count(text: str) -> int:
    """A positive whole number of bytes written as a quantity (`8Mi`, `10000000`); ValueError
    otherwise."""
    value = Quantity.parse(text).value
    if value <= 0 or value != value.to_integral_value() or value > MAX_BYTE_COUNT:
        raise ValueError(f"{text!r} is not a positive whole number of bytes")
    return int(value)
