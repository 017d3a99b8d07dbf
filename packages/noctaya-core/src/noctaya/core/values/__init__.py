"""Value objects that parse and print exactly as the API's durations and quantities are written.

`Quantity` is imported when first named: it brings the `decimal` module, which processes that
parse only durations (every gateway) need not hold.
"""

from typing import TYPE_CHECKING, Any

from noctaya.core.values.duration import Duration

if TYPE_CHECKING:
    from noctaya.core.values.quantity import Quantity

__all__ = ["Duration", "Quantity"]


def __getattr__(name: str) -> Any:
    if name == "Quantity":
        from noctaya.core.values.quantity import Quantity

        return Quantity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
