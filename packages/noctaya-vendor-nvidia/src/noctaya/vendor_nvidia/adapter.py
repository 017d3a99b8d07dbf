"""NVIDIA: the whole-device request and nothing else; the device plugin does the rest."""

from __future__ import annotations

from typing import Final

from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest


class NvidiaAdapter:
    """Adds only the `limits[<resourceName>]` entry (typically `nvidia.com/gpu`)."""

    vendor: Final = "nvidia"

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(vendor=self.vendor, limits=request.whole_device_limits())
