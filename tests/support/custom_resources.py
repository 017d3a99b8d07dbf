"""Typed access to custom objects by kind: group, plural and scope come from one table.

The generated client returns bare `object`s for custom resources; tests want dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client as k8s_client

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    namespaced: bool


RESOURCES = {
    "LLMService": Resource("serving.noctaya.io", "v1alpha1", "llmservices", namespaced=True),
    "InferenceRuntime": Resource(
        "serving.noctaya.io", "v1alpha1", "inferenceruntimes", namespaced=False
    ),
    "ScaledObject": Resource("keda.sh", "v1alpha1", "scaledobjects", namespaced=True),
    "TriggerAuthentication": Resource(
        "keda.sh", "v1alpha1", "triggerauthentications", namespaced=True
    ),
    "ClusterTriggerAuthentication": Resource(
        "keda.sh", "v1alpha1", "clustertriggerauthentications", namespaced=False
    ),
    "CustomResourceDefinition": Resource(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False
    ),
}


class CustomResources:
    """Create, read and delete custom objects as plain dicts."""

    def __init__(self, api_client: k8s_client.ApiClient) -> None:
        self._api = k8s_client.CustomObjectsApi(api_client)

    def create(
        self,
        manifest: Manifest,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Manifest:
        """`dry_run` runs defaulting and full admission without storing anything."""
        resource = RESOURCES[manifest["kind"]]
        options: dict[str, Any] = {"dry_run": "All" if dry_run else None}
        if field_validation:
            options["field_validation"] = field_validation
        if resource.namespaced:
            created = self._api.create_namespaced_custom_object(
                resource.group,
                resource.version,
                _required(namespace, manifest["kind"]),
                resource.plural,
                manifest,
                **options,
            )
        else:
            created = self._api.create_cluster_custom_object(
                resource.group, resource.version, resource.plural, manifest, **options
            )
        return cast(Manifest, created)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Manifest:
        resource = RESOURCES[kind]
        if resource.namespaced:
            found = self._api.get_namespaced_custom_object(
                resource.group,
                resource.version,
                _required(namespace, kind),
                resource.plural,
                name,
            )
        else:
            found = self._api.get_cluster_custom_object(
                resource.group, resource.version, resource.plural, name
            )
        return cast(Manifest, found)

    def patch(self, kind: str, name: str, change: Manifest, namespace: str) -> Manifest:
        """A merge patch of a namespaced object."""
        resource = RESOURCES[kind]
        patched = self._api.patch_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name, change
        )
        return cast(Manifest, patched)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        resource = RESOURCES[kind]
        if resource.namespaced:
            self._api.delete_namespaced_custom_object(
                resource.group,
                resource.version,
                _required(namespace, kind),
                resource.plural,
                name,
            )
        else:
            self._api.delete_cluster_custom_object(
                resource.group, resource.version, resource.plural, name
            )


def _required(namespace: str | None, kind: str) -> str:
    if namespace is None:
        raise ValueError(f"{kind} is namespaced: pass a namespace")
    return namespace
