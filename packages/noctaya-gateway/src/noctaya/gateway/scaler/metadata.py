"""What KEDA asked for: the trigger metadata of a ScaledObject, checked on every RPC.

Every RPC validates the metadata so a misconfigured ScaledObject fails loudly in KEDA's events
instead of scaling on a wrong target. A message names the offending field and quotes its value
(cut to MAX_ECHOED_CHARS).

Metadata is read and refused as the reference implementation does, on purpose: a ScaledObject
valid for one is valid for the other. `targetValue` is a number as its `strconv.ParseFloat`
reads one, and messages quote values with Go's `%q` (`go_quote`), since KEDA's events show them
and users compare them.
"""

from __future__ import annotations

import math
import re

from noctaya.core.values.go_text import go_quote
from noctaya.gateway.scaler.messages import GetMetricsRequest, ScaledObjectRef

METRIC_NAME = "pending"
# One way to match each mantissa: with `\.?` between two digit runs, a long run of digits without
# its `p` would make the match try every split point, seconds of CPU for one 64 KiB request.
_GO_HEX_FLOAT = re.compile(
    r"[+-]?0[xX]([0-9a-fA-F]+(\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
)
# A status message travels in a gRPC trailer, which clients refuse past 8-16 KiB (KEDA would see
# RESOURCE_EXHAUSTED, not our message); a request's own text is echoed up to this many characters.
MAX_ECHOED_CHARS = 128


class ScalerRequestError(ValueError):
    """A request KEDA should not have sent; answered with gRPC INVALID_ARGUMENT and this message."""


def target_value(ref: ScaledObjectRef | None) -> float:
    """The validated `targetValue` of the trigger metadata."""
    if ref is None:
        raise ScalerRequestError("scaledObjectRef is required")
    metadata = ref.scaler_metadata
    metric = metadata.get("metricName", "") or METRIC_NAME
    if metric != METRIC_NAME:
        raise ScalerRequestError(f"unsupported metricName {_echo(metric)}")
    raw = metadata.get("targetValue", "")
    if not raw:
        raise ScalerRequestError("targetValue metadata is required")
    value = _parse_go_float(raw)
    if value is None or not math.isfinite(value) or value <= 0:
        raise ScalerRequestError(f"targetValue {_echo(raw)} must be a positive number")
    return value


def check_metrics_request(request: GetMetricsRequest) -> float:
    """Validate a GetMetrics request; return the target value of its ScaledObject."""
    target = target_value(request.scaled_object_ref)
    if request.metric_name != METRIC_NAME:
        raise ScalerRequestError(
            f"metricName {_echo(request.metric_name)} does not match configured metric "
            f"{go_quote(METRIC_NAME)}"
        )
    return target


def _echo(text: str) -> str:
    """`text` quoted (module docstring); past MAX_ECHOED_CHARS cut, with `...` after the quote."""
    if len(text) <= MAX_ECHOED_CHARS:
        return go_quote(text)
    return go_quote(text[:MAX_ECHOED_CHARS]) + "..."


def _parse_go_float(text: str) -> float | None:
    """The number `text` spells (module docstring): ASCII only, no surrounding spaces, no
    underscores, and a hexadecimal mantissa only with its `p` exponent (`0x1p4`; `0x10` is no
    number)."""
    if not text.isascii() or text != text.strip() or "_" in text:
        return None
    try:
        if text.lstrip("+-")[:2].lower() == "0x":
            return float.fromhex(text) if _GO_HEX_FLOAT.fullmatch(text) else None
        return float(text)
    except (ValueError, OverflowError):  # a hexadecimal one out of range is no number either
        return None
