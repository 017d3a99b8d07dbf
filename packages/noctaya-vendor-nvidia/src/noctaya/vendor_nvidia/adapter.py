"""NVIDIA: the whole-device request and nothing else; the device plugin does the rest.

On one machine (local mode) it also lists the GPUs with `nvidia-smi -L` and names the variable
CUDA reads the visible ones from.
"""

from __future__ import annotations

import re
from typing import Final

from noctaya.core.devices import tool_output
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest

LIST_COMMAND: Final = ("nvidia-smi", "-L")
_GPU_LINE = re.compile(r"^GPU (\d+): ", re.MULTILINE)
"""`GPU 0: NVIDIA A10 (UUID: GPU-…)`; the indented MIG lines under a GPU are not devices CUDA
numbers on its own."""


class NvidiaAdapter:
    """Adds only the `limits[<resourceName>]` entry (typically `nvidia.com/gpu`)."""

    vendor: Final = "nvidia"
    visible_devices_env: Final = "CUDA_VISIBLE_DEVICES"

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(vendor=self.vendor, limits=request.whole_device_limits())

    def local_devices(self) -> tuple[str, ...] | None:
        listing = tool_output(LIST_COMMAND)
        return None if listing is None else gpu_indexes(listing)


def gpu_indexes(listing: str) -> tuple[str, ...]:
    """The GPU indexes in `nvidia-smi -L` output, the ids CUDA_VISIBLE_DEVICES takes."""
    return tuple(_GPU_LINE.findall(listing))
