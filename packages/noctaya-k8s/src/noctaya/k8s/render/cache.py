"""Create-once cache objects: the cache PVC and the prewarm / OCI staging Job. Both carry the
hash of their rendered spec, so a changed request is detected.
"""

from __future__ import annotations

from noctaya.core.cache_planning import FETCH_PERMANENT_FAILURE, PrewarmPlan, PvcCache
from noctaya.core.plan.backend import BackendPlan
from noctaya.core.plan.serving import ServingPlan, cache_volume
from noctaya.k8s.apply import with_create_once_hash
from noctaya.k8s.render.backend import apply_scheduling, template_metadata
from noctaya.k8s.render.container import volume
from noctaya.k8s.render.fetcher import fetch_container, fetcher_pod_identity
from noctaya.k8s.render.labels import selector_labels
from noctaya.k8s.render.objects import Obj, new_object, set_image_pull_secrets

PREWARM_BACKOFF_LIMIT = 4
PREWARM_CONTAINER = "prewarm"


def render_cache_pvc(plan: ServingPlan) -> Obj | None:
    volume = plan.cache.volume
    if not isinstance(volume, PvcCache):
        return None
    svc = plan.service
    obj = new_object(
        "v1", "PersistentVolumeClaim", volume.claim_name, svc.namespace, selector_labels(svc)
    )
    spec: Obj = {
        "accessModes": [volume.access_mode],
        "resources": {"requests": {"storage": str(volume.size)}},
    }
    if volume.storage_class_name:
        spec["storageClassName"] = volume.storage_class_name
    obj["spec"] = spec
    return with_create_once_hash(obj)


def render_prewarm_job(plan: ServingPlan) -> Obj | None:
    """The Job that runs `noctaya-fetch` into the cache: no accelerator, no service account,
    a read-only root filesystem with a scratch volume for what the fetch clients write besides
    the model.

    A transient failure is retried, in a new pod, up to the backoff limit; a permanent one
    (`FETCH_PERMANENT_FAILURE`: a missing or refused artifact, an unsafe entry) fails the Job at
    once through its pod failure policy, instead of after four restarts and their back-off
    (over a minute) that cannot help. A pod evicted or preempted does not count as a try.
    """
    prewarm = plan.prewarm
    if prewarm is None:
        return None
    svc, backend = plan.service, plan.backend
    labels = selector_labels(svc)  # no runtime label: the backend Pod watch ignores these pods
    obj = new_object("batch/v1", "Job", svc.prewarm_job, svc.namespace, labels)
    obj["spec"] = {
        "backoffLimit": PREWARM_BACKOFF_LIMIT,
        "podFailurePolicy": _pod_failure_policy(),
        "template": {
            "metadata": template_metadata(labels, backend.scheduling),
            "spec": _prewarm_pod(prewarm, backend),
        },
    }
    return with_create_once_hash(obj)


def _pod_failure_policy() -> Obj:
    """A permanent fetch failure fails the Job at once; a disrupted pod (evicted, preempted)
    does not count against the backoff limit."""
    return {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": PREWARM_CONTAINER,
                    "operator": "In",
                    "values": [FETCH_PERMANENT_FAILURE],
                },
            },
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        ]
    }


def _prewarm_pod(prewarm: PrewarmPlan, backend: BackendPlan) -> Obj:
    """The fetcher's pod: the cache, the fetcher's own volumes, and the backend's pull secrets
    and node placement."""
    container, volumes = fetch_container(prewarm, PREWARM_CONTAINER)
    pod: Obj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": fetcher_pod_identity(prewarm.volume),
        "containers": [container],
        "volumes": [volume(cache_volume(prewarm.volume, read_only=False)), *volumes],
    }
    set_image_pull_secrets(pod, backend.image_pull_secrets)
    apply_scheduling(pod, backend.scheduling)
    return pod
