"""The vendor-neutral vocabulary a vendor adapter speaks: what is asked for, what it adds.

No Kubernetes types: the renderer turns limits into container resource limits and host mounts
into hostPath volumes plus read-only volume mounts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from noctaya.core.errors import NoctayaError


@dataclass(frozen=True, slots=True)
class AcceleratorRequest:
    """Whole devices of the extended resource a runtime names, counted by the service.

    `runtime` is the InferenceRuntime name, carried so errors can say which runtime is wrong.
    """

    runtime: str
    resource_name: str
    devices: int

    def __post_init__(self) -> None:
        if not self.resource_name:
            raise NoctayaError(
                "Render", f"runtime {json.dumps(self.runtime)} has no accelerator.resourceName"
            )

    def whole_device_limits(self) -> dict[str, int]:
        """The limit entry every vendor asks for: extended resources go in limits only.

        A count below one still asks for one device: a backend without its accelerator cannot serve.
        """
        return {self.resource_name: max(self.devices, 1)}


@dataclass(frozen=True, slots=True)
class HostMount:
    """A host path exposed to the serving container (driver files, tools) at `mount_path`."""

    name: str
    host_path: str
    mount_path: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class AcceleratorPlan:
    """Everything one vendor adds to the vendor-neutral serving pod, in render order."""

    vendor: str
    limits: Mapping[str, int]
    host_mounts: tuple[HostMount, ...] = ()
