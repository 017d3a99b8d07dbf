"""Value objects that parse and print exactly like their Go/Kubernetes originals."""

from noctaya.core.values.duration import Duration
from noctaya.core.values.quantity import Quantity

__all__ = ["Duration", "Quantity"]
