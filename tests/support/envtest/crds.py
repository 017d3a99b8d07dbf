"""Installing CustomResourceDefinitions and waiting until the server serves them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from ..custom_resources import CustomResources
from .api_errors import api_status
from .control_plane import ControlPlaneError

_POLL_SECONDS = 0.05


def crd_manifests(folders: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every CustomResourceDefinition document in the folders' *.yaml files, with its file."""
    found = []
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            for document in yaml.safe_load_all(path.read_text()):
                if isinstance(document, dict) and document.get("kind") == (
                    "CustomResourceDefinition"
                ):
                    found.append((path, document))
    return found


def install_crds(
    api_client: k8s_client.ApiClient,
    manifests: list[tuple[Path, dict[str, Any]]],
    timeout: float = 60.0,
) -> list[str]:
    """Creates each CRD, then waits until all are Established; returns their names.

    Manifests go to the server as plain JSON through the generic path: the typed client would
    check them against its own models first, and the API server's verdict is the one that counts.
    """
    resources = CustomResources(api_client)
    names = []
    for path, manifest in manifests:
        try:
            # Strict: an unknown schema keyword fails here instead of being dropped silently.
            resources.create(manifest, field_validation="Strict")
        except ApiException as error:
            raise ControlPlaneError(
                f"the API server rejected the CRD in {path}: {api_status(error)['message']}"
            ) from error
        names.append(manifest["metadata"]["name"])
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        pending = {name for name in pending if not established(api_client, name)}
        if pending and time.monotonic() > deadline:
            raise ControlPlaneError(
                f"CRDs not Established within {timeout:.0f}s: {sorted(pending)}"
            )
        if pending:
            time.sleep(_POLL_SECONDS)
    return names


def established(api_client: k8s_client.ApiClient, name: str) -> bool:
    crd = CustomResources(api_client).get("CustomResourceDefinition", name)
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
