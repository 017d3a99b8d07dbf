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
    """Downloads a model (Hugging Face, ModelScope, OCI) for the prewarm Job and the local mode.

    The caller owns the destination: it hands over a fresh `.partial` directory and promotes
    it atomically afterwards, so a fetcher never leaves a half-written model visible.
    """

    def fetch(self, uri: str, destination: Path) -> None:
        """Write the model named by `uri` into `destination`; raise on any failure."""
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
