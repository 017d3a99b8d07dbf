"""A CRD upgraded ahead of the operator: services keep reconciling.

Helm and kustomize upgrade CRDs before the operator's Deployment rolls, and a rollback leaves the
newer CRD (and the status a newer operator wrote) behind. The API server then returns fields this
operator's models do not know, in spec and in status; it must ignore them, not fail every service.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s_client
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import conditions, eventually, read, replace_status
from .conftest import RunningController

pytestmark = pytest.mark.integration

API_VERSION = "serving.noctaya.io/v1alpha1"
NEWER_FIELDS = {
    "llmservices.serving.noctaya.io": {
        "spec": {"futureField": {"type": "string"}},
        "status": {"futureStatus": {"type": "string"}},
    },
    "inferenceruntimes.serving.noctaya.io": {"spec": {"futureRuntimeField": {"type": "string"}}},
}


def _schema(crd: Manifest) -> Manifest:
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def _replace_schema(api: k8s_client.ApiextensionsV1Api, name: str, schema: Manifest) -> None:
    crd = api.api_client.sanitize_for_serialization(api.read_custom_resource_definition(name))
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    api.replace_custom_resource_definition(name, crd)


def _kept(resources: CustomResources, namespace: str) -> bool:
    """Whether the API server now keeps the newer fields (a dry run stores nothing)."""
    service = llmservice("probe", {"futureField": "x"})
    runtime = inference_runtime(f"probe-{secrets.token_hex(3)}", {"futureRuntimeField": "x"})
    service_kept = "futureField" in resources.create(service, namespace, dry_run=True)["spec"]
    runtime_kept = "futureRuntimeField" in resources.create(runtime, dry_run=True)["spec"]
    return service_kept and runtime_kept


@pytest.fixture
def newer_crds(
    api_client: k8s_client.ApiClient, resources: CustomResources, namespace: str
) -> Iterator[None]:
    """Both CRDs with fields this operator does not know; the generated ones are put back after."""
    api = k8s_client.ApiextensionsV1Api(api_client)
    originals: dict[str, Manifest] = {}
    for name, additions in NEWER_FIELDS.items():
        crd = api_client.sanitize_for_serialization(api.read_custom_resource_definition(name))
        originals[name] = _schema(crd)
        schema = copy.deepcopy(originals[name])
        for part, fields in additions.items():
            schema["properties"][part]["properties"].update(fields)
        _replace_schema(api, name, schema)
    eventually(lambda: _kept(resources, namespace), "the upgraded CRDs to be served")
    yield
    for name, schema in originals.items():
        _replace_schema(api, name, schema)
    eventually(lambda: not _kept(resources, namespace), "the generated CRDs to be served again")


def _reconciled_at(generation: int, status: Manifest) -> Manifest | None:
    """The status if the controller reconciled this generation, else None."""
    ready = conditions(status).get("Ready") or {}
    if status.get("phase") == "ScaledToZero" and ready.get("observedGeneration") == generation:
        return status
    return None


def test_services_keep_reconciling_after_a_crd_upgrade_adds_spec_and_status_fields(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    newer_crds: None,
    start_controller: Callable[..., RunningController],
    status_of: Callable[[str, str], Manifest],
) -> None:
    resources.create(inference_runtime(runtime_name, {"futureRuntimeField": "newer runtime"}))
    spec: dict[str, Any] = {"runtime": {"name": runtime_name}, "futureField": "newer spec"}
    created = resources.create(llmservice("upgraded", spec), namespace)
    newer_status = {"phase": "Ready", "futureStatus": "written by a newer operator"}
    replace_status(api_client, API_VERSION, "LLMService", namespace, "upgraded", newer_status)

    start_controller().wait_reconciling()

    generation = created["metadata"]["generation"]
    status = eventually(
        lambda: _reconciled_at(generation, status_of("upgraded", namespace)),
        "the service to be reconciled despite the newer fields",
    )
    # Reconciled all the way: no controller-manager runs a gateway here, and status says so.
    assert conditions(status)["Ready"]["reason"] == "GatewayUnavailable"
    assert read(api_client, "apps/v1", "Deployment", namespace, "upgraded") is not None
