"""The cpu vendor: no device request, `accelerators` counted as CPU cores, on a cluster and in
local mode, and the llama.cpp example on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from noctaya.core.errors import NoctayaError
from noctaya.core.plugins import VendorRegistry
from noctaya.core.ports import LocalDevices
from noctaya.core.vendors import AcceleratorPlan, AcceleratorRequest
from noctaya.k8s.cli import main
from noctaya.local.devices import MachineDevices
from noctaya.local.errors import LocalConfigError
from noctaya.vendor_cpu import CpuAdapter

EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu" / "llamacpp.yaml"


def test_cpu_asks_for_the_cores_and_no_device() -> None:
    plan = CpuAdapter().accelerator_plan(AcceleratorRequest("llamacpp-cpu", "cpu", 3))

    assert plan == AcceleratorPlan(vendor="cpu", limits={"cpu": 3}, host_mounts=())


def test_cpu_refuses_an_extended_resource_no_node_would_advertise() -> None:
    with pytest.raises(NoctayaError, match=r'resourceName "nvidia.com/gpu".*only "cpu"'):
        CpuAdapter().accelerator_plan(AcceleratorRequest("rt", "nvidia.com/gpu", 1))


def test_cpu_is_the_installed_adapter_and_its_slots_are_this_process_cores() -> None:
    adapter = VendorRegistry.discover().adapter("cpu")

    assert isinstance(adapter, CpuAdapter)
    assert isinstance(adapter, LocalDevices)
    assert adapter.visible_devices_env is None
    assert adapter.local_devices() == tuple(str(c) for c in sorted(os.sched_getaffinity(0)))


def test_local_mode_budgets_cpu_slots_and_refuses_more_than_the_machine_has() -> None:
    devices = MachineDevices([], VendorRegistry.discover())
    cores = len(os.sched_getaffinity(0))

    pool = devices.pool("cpu")
    assert pool is not None
    assert len(pool.ids) == cores
    assert pool.visible_env is None
    devices.check("fits", "cpu", cores)
    with pytest.raises(LocalConfigError, match=rf"more than the {cores} cpu device"):
        devices.check("too-big", "cpu", cores + 1)


def test_the_llamacpp_example_validates_and_renders_only_a_cpu_request_and_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "-f", str(EXAMPLE)]) == 0
    capsys.readouterr()
    assert main(["render", "-f", str(EXAMPLE)]) == 0
    rendered = capsys.readouterr()
    deployments = [
        doc
        for doc in yaml.safe_load_all(rendered.out)
        if doc and doc["kind"] == "Deployment" and "serving" in str(doc["spec"]["template"])
    ]
    serving = [
        container
        for doc in deployments
        for container in doc["spec"]["template"]["spec"]["containers"]
        if container["name"] == "serving"
    ]
    assert len(serving) == 1
    resources = serving[0]["resources"]
    assert resources["limits"] == {"cpu": "2", "memory": "2Gi"}
    assert "cpu" not in resources.get("requests", {})  # Kubernetes takes the limit as request


def _gateway_env(capsys: pytest.CaptureFixture[str], example: Path) -> dict[str, str]:
    assert main(["render", "-f", str(example)]) == 0
    (gateway,) = [
        container
        for doc in yaml.safe_load_all(capsys.readouterr().out)
        if doc and doc["kind"] == "Deployment"
        for container in doc["spec"]["template"]["spec"]["containers"]
        if container["name"] == "gateway"
    ]
    return {item["name"]: item.get("value", "") for item in gateway["env"]}


def test_the_gateway_asks_the_path_the_runtimes_readiness_probe_asks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """llama.cpp's server has no /health: a gateway probing the default path through the Service
    would never see the backend ready and answer every cold request 503. The example probes
    /docs, which answers without waiting behind a running request as /v1/models does."""
    assert _gateway_env(capsys, EXAMPLE)["NOCTAYA_BACKEND_READINESS_PATH"] == "/docs"
    a10 = EXAMPLE.parents[1] / "nvidia" / "a10"
    assert "NOCTAYA_BACKEND_READINESS_PATH" not in _gateway_env(capsys, a10)
