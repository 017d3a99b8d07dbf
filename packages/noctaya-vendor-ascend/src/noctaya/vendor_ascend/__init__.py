"""The `ascend` vendor plugin, registered through the `noctaya.vendors` entry point."""

from noctaya.core.plugins import hookimpl
from noctaya.core.ports import VendorAdapter
from noctaya.vendor_ascend.adapter import AscendAdapter

__all__ = ["AscendAdapter", "noctaya_vendor_adapter"]


@hookimpl
def noctaya_vendor_adapter() -> VendorAdapter:
    return AscendAdapter()
