"""The API server's own Pod Security admission as a judge: namespaces that enforce each level,
and a pod created there as a dry run (stored nowhere) to see whether it is admitted."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from noctaya.core.plan.pod_security import ENFORCE_LABEL, Level


@contextmanager
def enforcing_namespaces(api_client: k8s_client.ApiClient) -> Iterator[dict[Level, str]]:
    """A namespace per level, each enforcing it (the server's own version of the rules)."""
    core = k8s_client.CoreV1Api(api_client)
    suffix = secrets.token_hex(3)
    names = {level: f"pod-security-{level}-{suffix}" for level in Level}
    for level, name in names.items():
        core.create_namespace({"metadata": {"name": name, "labels": {ENFORCE_LABEL: str(level)}}})
    try:
        yield names
    finally:
        for name in names.values():
            core.delete_namespace(name)


def admission_refusal(
    api_client: k8s_client.ApiClient, namespace: str, name: str, spec: dict[str, Any]
) -> str:
    """Why the namespace's admission refuses a pod of `spec` (dry run); empty if it admits it."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    try:
        k8s_client.CoreV1Api(api_client).create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as refused:
        if refused.status != 403:
            raise
        return str(refused.body)
    return ""
