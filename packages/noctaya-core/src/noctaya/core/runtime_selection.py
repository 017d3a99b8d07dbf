"""Which InferenceRuntime serves a service: a pinned name, or vendor order then priority.

Vendor order beats priority: a lower-priority runtime of the first listed vendor wins over any
runtime of a later vendor. A tie at the top priority is an error, never a silent pick. The
operator and local mode both resolve through `resolve_runtime`, over their own `RuntimeCatalog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from noctaya.core.errors import NoctayaError
from noctaya.core.values.go_text import go_list, go_quote

if TYPE_CHECKING:
    from noctaya.core.api import InferenceRuntime
    from noctaya.core.api.llmservice import RuntimeSelection
    from noctaya.core.ports import RuntimeCatalog

REASON = "RuntimeResolution"


@dataclass(frozen=True, slots=True)
class RuntimeCandidate:
    """What selection needs to know of one cluster InferenceRuntime."""

    name: str
    vendor: str
    priority: int = 0


def pinned_runtime_name(name: str | None, vendors: Sequence[str] | None) -> str | None:
    """The runtime name to GET, or None when the vendor selector applies (name wins if both)."""
    if name:
        return name
    if vendors:
        return None
    raise NoctayaError(REASON, "spec.runtime: set either name or selector.vendor")


def runtime_lookup_error(name: str, error: object) -> NoctayaError:
    """The failure of fetching a pinned runtime, with the API error after the runtime's name."""
    return NoctayaError(REASON, f"get InferenceRuntime {go_quote(name)}: {error}")


def select_runtime(
    candidates: Iterable[RuntimeCandidate], vendors: Sequence[str]
) -> RuntimeCandidate:
    """The first vendor (in preference order) with any runtime decides; then highest priority."""
    pool = tuple(candidates)
    for vendor in vendors:
        offered = [candidate for candidate in pool if candidate.vendor == vendor]
        if not offered:
            continue  # unknown or absent vendors fall through to the next preference
        top = max(candidate.priority for candidate in offered)
        best = [candidate for candidate in offered if candidate.priority == top]
        if len(best) > 1:
            names = go_list(sorted(candidate.name for candidate in best))
            raise NoctayaError(
                REASON,
                f"multiple InferenceRuntimes match vendor {go_quote(vendor)} at priority {top}: "
                f"{names}; set spec.runtime.name",
            )
        return best[0]
    raise NoctayaError(REASON, f"no InferenceRuntime matches vendors {go_list(vendors)}")


def selected_vendors(selection: RuntimeSelection) -> list[str]:
    return list(selection.selector.vendor or []) if selection.selector else []


def resolve_runtime(selection: RuntimeSelection, catalog: RuntimeCatalog) -> InferenceRuntime:
    """The runtime a service's `spec.runtime` chooses among those `catalog` holds."""
    vendors = selected_vendors(selection)
    pinned = pinned_runtime_name(selection.name, vendors)
    if pinned is None:
        pinned = select_runtime(catalog.candidates(), vendors).name
    return catalog.runtime(pinned)


def may_choose(
    name: str | None, vendors: Sequence[str], runtime: str, runtime_vendor: str | None
) -> bool:
    """Whether a selection (pinned `name`, or `vendors`) can choose the runtime called `runtime`
    of `runtime_vendor`: the services a change to that runtime concerns."""
    if name:
        return name == runtime
    return bool(runtime_vendor) and runtime_vendor in vendors
