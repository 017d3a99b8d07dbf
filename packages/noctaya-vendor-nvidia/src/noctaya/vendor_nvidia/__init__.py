"""The `nvidia` vendor plugin, registered through the `noctaya.vendors` entry point."""

from noctaya.core.plugins import hookimpl
from noctaya.core.ports import VendorAdapter
from noctaya.vendor_nvidia.adapter import NvidiaAdapter

__all__ = ["NvidiaAdapter", "noctaya_vendor_adapter"]


@hookimpl
def noctaya_vendor_adapter() -> VendorAdapter:
    return NvidiaAdapter()
