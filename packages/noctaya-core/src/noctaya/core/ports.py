"""The ports: what the pure core needs from the outside world, as small structural interfaces.

Adapters (the Kubernetes operator, the gateway, the local mode, vendor plugins) implement them;
the core depends only on these shapes, so a policy can be tested with a plain in-memory object.

Model delivery has no port here: the cluster's prewarm and staging Jobs and local mode both run
the `noctaya-fetch` command (`noctaya.core.cache_planning.fetch_command`) as a process of its
own, so its command line, exit status and output are the contract, and no caller holds a
fetcher object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from noctaya.core.errors import NoctayaError
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest

if TYPE_CHECKING:  # the gateway imports `Clock` without the API models behind a plan
    from noctaya.core.api import InferenceRuntime
    from noctaya.core.observation import ServiceObservation
    from noctaya.core.plan.identity import ServiceIdentity
    from noctaya.core.plan.serving import ServingPlan
    from noctaya.core.runtime_selection import RuntimeCandidate


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


@runtime_checkable
class LocalDevices(Protocol):
    """What a vendor adapter may also know about the machine it runs on, for local mode: which
    of its devices are here, and the variable that makes a process see only some of them.

    Optional: an adapter without it still plans services; local mode then needs `--devices` to
    budget that vendor's devices, and cannot hand a process its share of them.
    """

    @property
    def visible_devices_env(self) -> str | None:
        """The variable a process reads its devices from (`CUDA_VISIBLE_DEVICES`), which takes
        a comma-separated list of the ids `local_devices` returns; None when there is none (CPU
        cores): the devices are still budgeted, but no engine is told which are its own."""
        ...

    def local_devices(self) -> tuple[str, ...] | None:
        """The ids of this machine's devices, in the vendor tool's order; None when the tool
        that lists them is missing or fails."""
        ...


class RuntimeCatalog(Protocol):
    """The InferenceRuntimes a service can run on: a cluster's, or those in local-mode files.

    Runtime resolution (`noctaya.core.runtime_selection.resolve_runtime`) reads them only
    through this port, so a service selects the same runtime wherever it is served.
    """

    def candidates(self) -> Iterable[RuntimeCandidate]:
        """Every runtime, as much as vendor selection needs to compare them."""
        ...

    def runtime(self, name: str) -> InferenceRuntime:
        """The runtime called `name`; a `NoctayaError("RuntimeResolution", …)` in the catalog's
        own words when there is none, or it cannot be read."""
        ...


class WorkloadOrchestrator(Protocol):
    """Where a serving plan becomes running workloads: Kubernetes objects or local processes.

    A process makes one where it is wired and hands it to what drives it, which knows only this
    shape: a driver is tested with an in-memory one, and the same planner feeds either platform.
    One orchestrator serves every service of its process (the operator calls it from several
    worker threads at once). A verb may return before the platform has done what it asks (the
    platform converges on the plan, as Kubernetes does); `observe` says how far it got, in the
    core's vendor-neutral terms.
    """

    def apply(self, plan: ServingPlan) -> None:
        """Make the workloads of `plan.service` match `plan`; idempotent. A plan the platform
        cannot run is refused (a `NoctayaError`) before anything changes; a failure once the
        plan's autoscaling is in place is a `FailedAfterAutoscaling`."""
        ...

    def observe(self, plan: ServingPlan) -> ServiceObservation:
        """What the serving path of `plan.service` (backend, gateway, autoscaling) is doing
        right now, once `plan` is applied; a `NoctayaError` for a fault that stops the service
        (a model fetch that failed for good)."""
        ...

    def remove(self, service: ServiceIdentity) -> None:
        """Take down the workloads of a service that is no longer served; nothing when it has
        none."""
        ...


class FailedAfterAutoscaling(NoctayaError):
    """`WorkloadOrchestrator.apply` failed with the plan's autoscaling already in place.

    The service's status reports the failure and still reports its autoscaling configured,
    which it is: a driver cannot tell this from an error alone.
    """


Clock = Callable[[], float]
"""Monotonic seconds (`time.monotonic` in production): injected so leases, grace periods and
deadlines are tested without sleeping."""
