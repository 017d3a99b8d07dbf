"""The nvidia adapter: the whole-device request and nothing else."""

from __future__ import annotations

from noctaya.core.plugins import VendorRegistry
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest
from noctaya.vendor_nvidia import NvidiaAdapter


def test_nvidia_adds_only_the_whole_device_limit() -> None:
    plan = NvidiaAdapter().accelerator_plan(AcceleratorRequest("a100", "nvidia.com/gpu", 4))

    assert plan == AcceleratorPlan(vendor="nvidia", limits={"nvidia.com/gpu": 4}, host_mounts=())


def test_nvidia_is_the_adapter_runtimes_with_vendor_nvidia_get() -> None:
    adapter = VendorRegistry.discover().adapter("nvidia")

    assert isinstance(adapter, NvidiaAdapter)
    assert adapter.vendor == "nvidia"
