"""The `example` vendor: a whole-device request plus one read-only host mount."""

from noctaya.core.plugins import hookimpl
from noctaya.core.ports import VendorAdapter
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest, HostMount


class ExampleAdapter:
    vendor = "example"

    def accelerator_plan(self, request: AcceleratorRequest) -> AcceleratorPlan:
        return AcceleratorPlan(
            vendor=self.vendor,
            limits=request.whole_device_limits(),
            host_mounts=(HostMount("example-tools", "/opt/example", "/opt/example"),),
        )


@hookimpl
def noctaya_vendor_adapter() -> VendorAdapter:
    return ExampleAdapter()
