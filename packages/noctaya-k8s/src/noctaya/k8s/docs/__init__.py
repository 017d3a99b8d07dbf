"""Pages of the manual generated from the code, so they cannot drift from it."""

from __future__ import annotations

from collections.abc import Callable

from noctaya.k8s.docs.api_reference import api_reference_page
from noctaya.k8s.docs.operator_flags import operator_flags_page

PAGES: dict[str, Callable[[], str]] = {
    "api-reference": api_reference_page,
    "operator-flags": operator_flags_page,
}
"""`noctaya docs <page>` → the function that writes it."""

__all__ = ["PAGES"]
