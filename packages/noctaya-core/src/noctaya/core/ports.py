"""The ports: what the pure core needs from the outside world, as small structural interfaces.

Adapters (the Kubernetes operator, the gateway, the local mode, vendor plugins) implement them;
the core depends only on these shapes, so a policy can be tested with a plain in-memory object.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest

PlanT_contra = TypeVar("PlanT_contra", contravariant=True)
ObservationT_co = TypeVar("ObservationT_co", covariant=True)


@runtime_checkable
class VendorAdapter(Protocol):
    """An accelerator vendor: turns a whole-device request into the vendor's additions.

    Found only through the `noctaya.vendors` entry points (see `noctaya.core.plugins`).
    Runtime-checkable so a plugin that returns something else is rejected at discovery.
    """

    @property
    def vendor(self) -> str:
        """The name an InferenceRuntime's `spec.vendor` uses, for example `nvidia`."""
        ...

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        """The resource limits and host mounts this vendor's serving container needs."""
        ...


class ModelFetcher(Protocol):
    """Delivers a model (Hugging Face, ModelScope, OCI) into a cache, for the prewarm Job and
    the local mode.

    The fetcher owns the whole delivery, `.partial` included: only it knows what its library
    can resume from a half-written `.partial` and where in the cache the engine will look. It
    verifies, promotes atomically and writes the readiness marker last, so a reader waiting
    for the marker never sees a half-written model; with the marker present it touches no
    network.
    """

    def fetch(self, uri: str, cache: Path) -> Path:
        """Deliver the model `uri` names under `cache`; return the directory an engine loads."""
        ...


class WorkloadOrchestrator(Protocol[PlanT_contra, ObservationT_co]):
    """Where a serving plan becomes running workloads: Kubernetes objects or local processes.

    Generic so the core's plan and observation types stay the only contract between them.
    """

    def apply(self, plan: PlanT_contra) -> None:
        """Make the world match `plan`; idempotent."""
        ...

    def observe(self, plan: PlanT_contra) -> ObservationT_co:
        """What is running for `plan` right now, in vendor-neutral terms."""
        ...


class TokenSource(Protocol):
    """A secret that may rotate (client API key, demand token): read fresh on every call."""

    def token(self) -> str:
        """The current value; callers never cache it, so rotation needs no restart."""
        ...


Clock = Callable[[], float]
"""Monotonic seconds (`time.monotonic` in production): injected so leases, grace periods and
deadlines are tested without sleeping."""
