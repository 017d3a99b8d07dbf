"""Small builders for the shapes every rendered object shares."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def new_object(
    api_version: str,
    kind: str,
    name: str,
    namespace: str,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> Obj:
    metadata: Obj = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def env(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def secret_volume(name: str, secret: str, mode: int, items: list[Obj] | None = None) -> Obj:
    source: Obj = {"secretName": secret, "defaultMode": mode}
    if items:
        source["items"] = items
    return {"name": name, "secret": source}


def mount(name: str, path: str, read_only: bool = False) -> Obj:
    result: Obj = {"name": name, "mountPath": path}
    if read_only:
        result["readOnly"] = True
    return result


def set_image_pull_secrets(pod: Obj, names: tuple[str, ...]) -> None:
    """The service's pull Secrets, on every pod it runs (backend, gateway, scaler, prewarm)."""
    if names:
        pod["imagePullSecrets"] = [{"name": name} for name in names]


def http_probe(path: str, port: int | str) -> Obj:
    return {"httpGet": {"path": path, "port": port}}


IMAGE_USER = 65532
"""The Noctaya image's unprivileged user and group (its config's `User`)."""
RESTRICTED_POD_SECURITY: Obj = {
    "runAsNonRoot": True,
    "runAsUser": IMAGE_USER,
    "runAsGroup": IMAGE_USER,
    "fsGroup": IMAGE_USER,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The pod of a Noctaya image container; fsGroup lets it write a fresh claim's root."""
RESTRICTED_CONTAINER_SECURITY: Obj = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
