"""How a failed reconcile shows: the error it raises and the conditions it writes."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from kubernetes import client as k8s_client
from noctaya.core.errors import NoctayaError
from noctaya.k8s.reconciler import LLMServiceReconciler

from .cluster import create, replace_status

Conditions = dict[str, tuple[str, str, str]]


def reconcile_failure(reconciler: LLMServiceReconciler, namespace: str, name: str) -> NoctayaError:
    """Reconcile a service that must fail, and return what it failed with."""
    with pytest.raises(NoctayaError) as failure:
        reconciler.reconcile((namespace, name))
    return failure.value


def before_autoscaling(reason: str, message: str) -> Conditions:
    """A failure before the ScaledObject was applied: AutoscalingReady False too."""
    return {
        "AutoscalingReady": ("False", reason, message),
        "Ready": ("False", reason, message),
        "Degraded": ("True", reason, message),
    }


def after_autoscaling(reason: str, message: str) -> Conditions:
    """A failure after the ScaledObject was applied keeps AutoscalingReady True."""
    return {
        "AutoscalingReady": (
            "True",
            "ScaledObjectApplied",
            "KEDA External Push autoscaling is configured",
        ),
        "Ready": ("False", reason, message),
        "Degraded": ("True", reason, message),
    }


def fail_prewarm_job(
    api_client: k8s_client.ApiClient,
    namespace: str,
    job: str,
    pods: Mapping[str, Mapping[str, object]],
    *,
    failed: int,
    reason: str,
    message: str,
) -> None:
    """`job` failed as the Job controller records it (`reason`, `message`, `failed` pods), with a
    failed pod named by each key of `pods` whose prewarm container ended as its value says
    (`exitCode`, `message`, `finishedAt`): what a reconcile reads to explain a prewarm failure."""
    labels = {"app.kubernetes.io/managed-by": "noctaya", "batch.kubernetes.io/job-name": job}
    for name, terminated in pods.items():
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "prewarm", "image": "x"}]},
        }
        create(api_client, namespace, pod)
        container = {
            "name": "prewarm",
            "image": "x",
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"reason": "Error", **terminated}},
        }
        status = {"phase": "Failed", "containerStatuses": [container]}
        replace_status(api_client, "v1", "Pod", namespace, name, status)
    now = "2025-01-01T00:02:00Z"
    why = {"reason": reason, "lastProbeTime": now, "lastTransitionTime": now}
    conditions = [
        {"type": kind, "status": "True", "message": message, **why}
        for kind in ("FailureTarget", "Failed")
    ]
    status = {"startTime": now, "failed": failed, "conditions": conditions}
    replace_status(api_client, "batch/v1", "Job", namespace, job, status)
