"""The cluster's add-ons, from their own manifests where they have them: CoreDNS (a minimal
Deployment serving only the cluster domain: nothing in the box reaches outside it), KEDA (its
module's config/, the admission webhooks left out, images from the box's archives) and the
storage provisioner (storage.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from . import components, layout, storage

KEDA_PARTS = ("general", "crd/bases", "service_account", "rbac", "manager", "metrics-server")
KEDA_IMAGES = {
    "ghcr.io/kedacore/keda:latest": components.KEDA_IMAGE,
    "ghcr.io/kedacore/keda-metrics-apiserver:latest": components.KEDA_IMAGE,
}
COREFILE = f""".:53 {{
    errors
    health :8080
    ready :8181
    kubernetes {layout.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
_POLL_SECONDS = 0.5


class AddonError(Exception):
    """An add-on did not become available; the message names it and what it is waiting for."""


def install_addons(
    api_client: k8s_client.ApiClient,
    programs: layout.Programs,
    folders: layout.Folders,
    deadline: float,
) -> None:
    client = dynamic.DynamicClient(api_client)  # type: ignore[no-untyped-call]
    folders.shared_volumes.mkdir(parents=True, exist_ok=True)
    for manifest in [
        *coredns_manifests(),
        *keda_manifests(programs.cluster / "keda-config"),
        *storage.storage_manifests(folders.shared_volumes),
    ]:
        _create(client, manifest)
    apps = k8s_client.AppsV1Api(api_client)
    for namespace, name in (
        ("kube-system", "coredns"),
        ("keda", "keda-operator"),
        ("keda", "keda-metrics-apiserver"),
        (storage.NAMESPACE, "local-path-provisioner"),
    ):
        _wait_available(apps, namespace, name, deadline)
    _wait_api_service(api_client, "v1beta1.external.metrics.k8s.io", deadline)


def keda_manifests(config: Path) -> Iterator[dict[str, Any]]:
    for part in KEDA_PARTS:
        for path in sorted((config / part).glob("*.yaml")):
            if path.name == "kustomization.yaml":
                continue
            for document in yaml.safe_load_all(path.read_text()):
                if isinstance(document, dict):
                    yield _local_images(document)


def coredns_manifests() -> list[dict[str, Any]]:
    namespace, labels = "kube-system", {"k8s-app": "kube-dns"}
    meta = {"name": "coredns", "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:coredns"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", **meta}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"Corefile": COREFILE}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {**meta, "labels": labels},
            "spec": {
                # Two on two nodes, as a kubeadm cluster runs it: a drained or lost node
                # leaves the cluster's names answered.
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "affinity": {
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": 100,
                                        "podAffinityTerm": {
                                            "labelSelector": {"matchLabels": labels},
                                            "topologyKey": "kubernetes.io/hostname",
                                        },
                                    }
                                ]
                            }
                        },
                        "serviceAccountName": "coredns",
                        "dnsPolicy": "Default",
                        "containers": [
                            {
                                "name": "coredns",
                                "image": components.COREDNS_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                                ],
                                "readinessProbe": {
                                    "httpGet": {"path": "/ready", "port": 8181},
                                    "periodSeconds": 2,
                                },
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}],
                            }
                        ],
                        "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": namespace, "labels": labels},
            "spec": {
                "clusterIP": layout.DNS_SERVICE_IP,
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ],
            },
        },
    ]


def _local_images(document: dict[str, Any]) -> dict[str, Any]:
    if document.get("kind") == "Deployment":
        for container in document["spec"]["template"]["spec"]["containers"]:
            container["image"] = KEDA_IMAGES.get(container["image"], container["image"])
            container["imagePullPolicy"] = "IfNotPresent"
    return document


def _create(client: dynamic.DynamicClient, manifest: dict[str, Any]) -> None:
    resource = client.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
    namespace = manifest["metadata"].get("namespace")
    try:
        resource.create(body=manifest, namespace=namespace)
    except ApiException as error:
        if error.status != 409:
            raise AddonError(
                f"{manifest['kind']} {manifest['metadata']['name']} refused: {error.body}"
            ) from error


def _wait_available(apps: k8s_client.AppsV1Api, namespace: str, name: str, deadline: float) -> None:
    while True:
        deployment = apps.read_namespaced_deployment(name, namespace)
        if deployment.status and (deployment.status.available_replicas or 0) >= 1:
            return
        if time.monotonic() > deadline:
            raise AddonError(f"Deployment {namespace}/{name} not available: {deployment.status}")
        time.sleep(_POLL_SECONDS)


def _wait_api_service(api_client: k8s_client.ApiClient, name: str, deadline: float) -> None:
    api = k8s_client.ApiregistrationV1Api(api_client)
    while True:
        service = api.read_api_service(name)
        conditions = (service.status and service.status.conditions) or []
        if any(c.type == "Available" and c.status == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise AddonError(f"APIService {name} not Available: {conditions}")
        time.sleep(_POLL_SECONDS)
