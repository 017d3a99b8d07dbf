"""The ascend adapter: the whole-device request plus four read-only host mounts, and
nothing that assigns devices itself (the Ascend device plugin does that)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from noctaya.core.plugins import VendorRegistry
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest, HostMount
from noctaya.vendor_ascend import AscendAdapter

REPO = Path(__file__).resolve().parents[2]
# Built from parts so that this file does not contain what it looks for.
DEVICE_VARIABLE = "ASCEND_" + "VISIBLE_" + "DEVICES"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_ascend_adds_the_limit_and_exactly_four_read_only_host_mounts_in_order() -> None:
    plan = AscendAdapter().accelerator_plan(
        AcceleratorRequest("ascend-910b3", "huawei.com/Ascend910", 1)
    )

    assert plan == AcceleratorPlan(
        vendor="ascend",
        limits={"huawei.com/Ascend910": 1},
        host_mounts=(
            HostMount(
                "ascend-driver", "/usr/local/Ascend/driver", "/usr/local/Ascend/driver", True
            ),
            HostMount("npu-smi", "/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi", True),
            HostMount("dcmi", "/usr/local/dcmi", "/usr/local/dcmi", True),
            HostMount(
                "ascend-install-info", "/etc/ascend_install.info", "/etc/ascend_install.info", True
            ),
        ),
    )


def test_ascend_310p_request_uses_the_runtime_resource_name() -> None:
    plan = AscendAdapter().accelerator_plan(
        AcceleratorRequest("ascend-310p-duo", "huawei.com/Ascend310P", 2)
    )

    assert plan.limits == {"huawei.com/Ascend310P": 2}
    assert [mount.name for mount in plan.host_mounts] == [
        "ascend-driver",
        "npu-smi",
        "dcmi",
        "ascend-install-info",
    ]


def test_ascend_is_the_adapter_runtimes_with_vendor_ascend_get() -> None:
    adapter = VendorRegistry.discover().adapter("ascend")

    assert isinstance(adapter, AscendAdapter)
    assert adapter.vendor == "ascend"


def test_device_visibility_variable_occurs_nowhere_in_the_repository() -> None:
    files = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    needle = DEVICE_VARIABLE.encode()
    offending = [
        name
        for name in files
        if name and (REPO / name).is_file() and needle in (REPO / name).read_bytes()
    ]

    assert len(files) > 10, "the repository listing is suspiciously empty"
    assert offending == []


def test_device_visibility_variable_occurs_nowhere_in_the_history() -> None:
    commits = _git("log", "--all", f"-S{DEVICE_VARIABLE}", "--format=%h %s")

    assert commits == ""
