"""Writing a vendor plugin: the vendors it says are built as plugins are the packages here, and
its cpu vendor section says what the cpu adapter, the renderer and local mode do."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.core.vendors import AcceleratorRequest
from noctaya.k8s.offline import render_files
from noctaya.local.devices import MachineDevices, parse_device_flag
from noctaya.local.errors import LocalConfigError
from noctaya.vendor_cpu import CpuAdapter

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "vendor-plugins.md"
EXAMPLE = REPO / "examples" / "cpu" / "llamacpp.yaml"


def text() -> str:
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def cpu_section() -> str:
    return text().split("## The cpu vendor", 1)[1].split(" ## ", 1)[0]


def test_the_vendors_said_to_be_plugins_are_the_vendor_packages_and_the_installed_ones() -> None:
    named = re.search(r"((?:`\w+`, )*`\w+`,? and `\w+`) are built this way", text())
    assert named, "the page names the vendors built as plugins"
    vendors = set(re.findall(r"`(\w+)`", named[1]))
    packages = {
        package.name.removeprefix("noctaya-vendor-")
        for package in REPO.glob("packages/noctaya-vendor-*")
    }
    assert vendors == packages
    assert vendors <= set(VendorRegistry.discover().vendors)


def test_the_cpu_vendor_takes_only_the_cpu_resource_name_as_the_section_says() -> None:
    section = cpu_section()
    assert "`spec.vendor: cpu`" in section
    assert "`accelerator.resourceName: cpu`" in section
    assert "refused with `Render`" in section
    with pytest.raises(NoctayaError) as refused:
        CpuAdapter().accelerator_plan(AcceleratorRequest("rt", "nvidia.com/gpu", 1))
    assert refused.value.reason == "Render"


def test_accelerators_are_cores_limited_with_no_request_mount_or_device_variable() -> None:
    section = cpu_section()
    assert "`{cpu: N}` with no host mounts" in section
    assert "the `cpu` limit and no request of its own" in section
    assert "No device plugin, extended resource or visible-devices variable" in section
    plan = CpuAdapter().accelerator_plan(AcceleratorRequest("rt", "cpu", 3))
    assert plan.limits == {"cpu": 3}
    assert plan.host_mounts == ()
    assert CpuAdapter.visible_devices_env is None

    outcome = render_files(
        [EXAMPLE], VendorRegistry.discover(), gateway_image="gateway:test", gateway_replicas=1
    )
    assert outcome.problems == []
    (backend,) = [
        o
        for o in outcome.objects
        if o["kind"] == "Deployment" and "serving.noctaya.io/runtime" in o["metadata"]["labels"]
    ]
    pod = backend["spec"]["template"]["spec"]
    (serving,) = [c for c in pod["containers"] if c["name"] == "serving"]
    assert serving["resources"]["limits"]["cpu"] == "2"  # the example's resources.accelerators
    assert "cpu" not in serving["resources"].get("requests", {})
    assert all("hostPath" not in volume for volume in pod.get("volumes", []))


def test_local_mode_budgets_this_process_cores_or_the_named_ones_and_refuses_more() -> None:
    section = cpu_section()
    assert "the cores `noctaya-local` may run on (its CPU affinity)" in section
    assert "`--devices cpu=0,1,…`" in section
    assert "a service that asks for more cores than there are is refused" in section
    cores = len(os.sched_getaffinity(0))
    found = MachineDevices([], VendorRegistry.discover()).pool("cpu")
    assert found is not None
    assert len(found.ids) == cores
    assert found.visible_env is None  # "No variable tells an engine which cores it holds"

    named = MachineDevices([parse_device_flag("cpu=0,1")], VendorRegistry.discover())
    named.check("fits", "cpu", 2)
    with pytest.raises(LocalConfigError, match="more than the 2 cpu device"):
        named.check("too-big", "cpu", 3)
