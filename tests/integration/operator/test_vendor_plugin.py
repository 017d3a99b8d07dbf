"""A vendor plugin installed with pip is used by `noctaya-operator`, with nothing else to do.

The example plugin (tests/plugins, its own distribution, vendor `example`) is built and installed
into a directory on the operator process's path, as `pip install` into its image would. A
runtime naming that vendor serves with the plugin's resources; a runtime naming a vendor no
installed plugin provides fails its services with UnsupportedVendor, listing what is installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice
from support.operator_process import OperatorProcess, operator_account_kubeconfig, running
from support.vendor_plugins import install_example_plugin

from .cluster import conditions, eventually, read

pytestmark = pytest.mark.integration

CONVERGE = 60.0
"""Seconds for a separate operator process to start and reconcile on a busy machine."""
EXAMPLE = {"vendor": "example", "accelerator": {"resourceName": "example.com/dev"}}


@pytest.fixture
def operator_with_example_plugin(
    api_client: k8s_client.ApiClient,
    kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[OperatorProcess]:
    """`noctaya-operator` with its generated RBAC and the example plugin on its path."""
    monkeypatch.setenv("PYTHONPATH", str(install_example_plugin(tmp_path / "site")))
    config, revoke = operator_account_kubeconfig(
        api_client, kubeconfig, namespace, tmp_path / "operator.kubeconfig"
    )
    operator = OperatorProcess(config, tmp_path / "operator.log", namespace=namespace)
    try:
        with running(operator):
            operator.wait_ready(CONVERGE)
            yield operator
    finally:
        revoke()


@pytest.fixture
def unsupported_runtime(resources: CustomResources, runtime_name: str) -> Iterator[str]:
    name = f"{runtime_name}-acme"
    yield name
    with contextlib.suppress(ApiException):
        resources.delete("InferenceRuntime", name)


def _serving_container(deployment: Manifest) -> Any:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_pip_installed_vendor_serves_its_runtimes_and_an_uninstalled_one_is_unsupported(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    unsupported_runtime: str,
    operator_with_example_plugin: OperatorProcess,
) -> None:
    resources.create(inference_runtime(runtime_name, EXAMPLE))
    resources.create(inference_runtime(unsupported_runtime, {**EXAMPLE, "vendor": "acme"}))
    served = {
        "runtime": {"name": None, "selector": {"vendor": ["example"]}},
        "resources": {"accelerators": 2},
    }
    resources.create(llmservice("served", served), namespace)
    resources.create(llmservice("unserved", {"runtime": {"name": unsupported_runtime}}), namespace)

    deployment = eventually(
        lambda: read(api_client, "apps/v1", "Deployment", namespace, "served"),
        "the backend Deployment of the example vendor's runtime",
        timeout=CONVERGE,
    )
    container = _serving_container(deployment)
    assert container["resources"]["limits"]["example.com/dev"] == "2"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/opt/example"]["readOnly"] is True
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts["/opt/example"]["name"]]["hostPath"]["path"] == "/opt/example"

    def unsupported() -> Manifest | None:
        status = resources.get("LLMService", "unserved", namespace).get("status") or {}
        return conditions(status).get("Ready")

    ready = eventually(unsupported, "the UnsupportedVendor condition", timeout=CONVERGE)
    assert (ready["status"], ready["reason"]) == ("False", "UnsupportedVendor")
    assert ready["message"] == (
        'no backend adapter registered for vendor "acme"; '
        "installed vendors: [ascend cpu example nvidia]"
    )
