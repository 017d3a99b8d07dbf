"""Create-once cache objects: the cache PVC and the prewarm / OCI staging Job. Both carry the
hash of their rendered spec, so a changed request is detected.
"""

from __future__ import annotations

from noctaya.core.cache_planning import (
    CACHE_MOUNT_PATH,
    CACHE_VOLUME_NAME,
    FETCH_PERMANENT_FAILURE,
    REGISTRY_AUTH_DIR,
    REGISTRY_AUTH_FILE,
    REGISTRY_AUTH_SECRET_KEY,
    REGISTRY_AUTH_VOLUME_NAME,
    SCRATCH_MOUNT_PATH,
    SCRATCH_VOLUME_NAME,
    CacheVolume,
    HostPathCache,
    PrewarmPlan,
    PvcCache,
)
from noctaya.core.plan.backend import BackendPlan, secret_env
from noctaya.core.plan.container import Env, ScratchVolume
from noctaya.core.plan.serving import ServingPlan, cache_volume
from noctaya.k8s.apply import with_create_once_hash
from noctaya.k8s.render.backend import apply_scheduling, template_metadata
from noctaya.k8s.render.container import env_var, volume
from noctaya.k8s.render.labels import selector_labels
from noctaya.k8s.render.objects import (
    RESTRICTED_CONTAINER_SECURITY,
    RESTRICTED_POD_SECURITY,
    Obj,
    mount,
    new_object,
    secret_volume,
    set_image_pull_secrets,
)

PREWARM_BACKOFF_LIMIT = 4
PREWARM_CONTAINER = "prewarm"
_REGISTRY_AUTH_MODE = 0o400


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
    """The fetcher's pod: the cache and a scratch volume, the registry credentials when the
    service names a Secret, and the backend's pull secrets and node placement."""
    volumes = [
        volume(cache_volume(prewarm.volume, read_only=False)),
        volume(ScratchVolume(SCRATCH_VOLUME_NAME)),
    ]
    container: Obj = {
        "name": PREWARM_CONTAINER,
        "image": prewarm.image,
        "command": list(prewarm.command),
        "env": [env_var(e) for e in _prewarm_env(prewarm)],
        "securityContext": RESTRICTED_CONTAINER_SECURITY,
        "volumeMounts": [
            mount(CACHE_VOLUME_NAME, CACHE_MOUNT_PATH),
            mount(SCRATCH_VOLUME_NAME, SCRATCH_MOUNT_PATH),
        ],
    }
    if prewarm.registry_secret_name:
        items = [{"key": REGISTRY_AUTH_SECRET_KEY, "path": REGISTRY_AUTH_FILE}]
        volumes.append(
            secret_volume(
                REGISTRY_AUTH_VOLUME_NAME,
                prewarm.registry_secret_name,
                _REGISTRY_AUTH_MODE,
                items,
            )
        )
        container["volumeMounts"].append(
            mount(REGISTRY_AUTH_VOLUME_NAME, REGISTRY_AUTH_DIR, read_only=True)
        )
    pod: Obj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": _fetcher_identity(prewarm.volume),
        "containers": [container],
        "volumes": volumes,
    }
    set_image_pull_secrets(pod, backend.image_pull_secrets)
    apply_scheduling(pod, backend.scheduling)
    return pod


def _prewarm_env(prewarm: PrewarmPlan) -> list[Env]:
    """The Job's own env, the serving container's hub steering, then the hub token (last, so
    it wins over a runtime's)."""
    env = [Env(item.name, item.value) for item in prewarm.env]
    env += prewarm.runtime_env
    if prewarm.token_env is not None:
        env.append(secret_env(prewarm.token_env))
    return env


def _fetcher_identity(cache: CacheVolume) -> Obj:
    """Who the fetcher writes the cache as; the Noctaya image runs as an unprivileged user.

    On a claim, fsGroup lets that user write a fresh volume's root and read the 0400
    credentials (the kubelet gives a secret volume's files to the group). A hostPath folder is
    created root-owned and fsGroup does not apply to it, so there the fetcher runs as root, as
    the serving images do, still with every capability dropped and no way to gain one.
    """
    if isinstance(cache, HostPathCache):
        return {"runAsUser": 0, "runAsGroup": 0, "seccompProfile": {"type": "RuntimeDefault"}}
    return {**RESTRICTED_POD_SECURITY, "fsGroupChangePolicy": "OnRootMismatch"}
