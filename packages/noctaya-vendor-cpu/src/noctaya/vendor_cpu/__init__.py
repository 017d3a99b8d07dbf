"""The `cpu` vendor plugin, registered through the `noctaya.vendors` entry point."""

from noctaya.core.plugins import hookimpl
from noctaya.core.ports import VendorAdapter
from noctaya.vendor_cpu.adapter import CpuAdapter

__all__ = ["CpuAdapter", "noctaya_vendor_adapter"]


@hookimpl
def noctaya_vendor_adapter() -> VendorAdapter:
    return CpuAdapter()
