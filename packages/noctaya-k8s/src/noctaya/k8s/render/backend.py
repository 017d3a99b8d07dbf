"""The backend Deployment and its in-cluster Service. KEDA owns the replica count,
so the Deployment never sets `spec.replicas` and server-side apply never fights over it.
"""

from __future__ import annotations

from noctaya.core.cache_planning import (
    CACHE_MOUNT_PATH,
    CACHE_VOLUME_NAME,
    PrewarmPlan,
    python_command,
    wait_for_marker_program,
)
from noctaya.core.plan.backend import BackendPlan
from noctaya.core.plan.container import Mount, Scheduling, last_wins
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.k8s.render.container import (
    copied,
    env_var,
    pod_security_context,
    probe,
    toleration,
    volume,
    volume_mount,
)
from noctaya.k8s.render.fetcher import fetch_container, fetcher_root_identity
from noctaya.k8s.render.labels import VOLCANO_QUEUE, backend_pod_labels, selector_labels
from noctaya.k8s.render.objects import Obj, mount, new_object, set_image_pull_secrets

WAIT_FOR_PREWARM = "wait-for-prewarm"
FETCH_MODEL = "fetch-model"


def apply_scheduling(pod: Obj, scheduling: Scheduling) -> None:
    """Node selector, tolerations and scheduler, shared by backend and prewarm pods."""
    if scheduling.node_selector:
        pod["nodeSelector"] = dict(scheduling.node_selector)
    if scheduling.tolerations:
        pod["tolerations"] = [toleration(t) for t in scheduling.tolerations]
    if scheduling.scheduler_name:
        pod["schedulerName"] = scheduling.scheduler_name


def template_metadata(labels: dict[str, str], scheduling: Scheduling) -> Obj:
    metadata: Obj = {"labels": labels}
    if scheduling.volcano_queue:
        metadata["annotations"] = {VOLCANO_QUEUE: scheduling.volcano_queue}
    return metadata


def _resources(plan: BackendPlan) -> Obj:
    requests: Obj = {}
    limits: Obj = {}
    if plan.cpu:
        requests["cpu"] = plan.cpu
    if plan.memory:
        requests["memory"] = limits["memory"] = plan.memory
    for name, count in plan.limits.items():
        limits[name] = str(count)
        if name in requests:
            # A vendor that counts a compute resource (the cpu vendor's cores) sets the request
            # too; without a request of its own Kubernetes takes the limit as the request.
            requests[name] = limits[name]
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources


def render_backend_deployment(
    svc: ServiceIdentity, plan: BackendPlan, fetcher: PrewarmPlan | None = None
) -> Obj:
    """`fetcher`: the Job's fetcher, run by each backend pod before serving, for a cache the
    core says is `fetched_on_each_node`; otherwise a marker is waited for."""
    labels = backend_pod_labels(svc, plan.runtime)
    cache = plan.cache
    env, volumes, mounts = list(plan.env), list(plan.volumes), list(plan.mounts)
    if cache is not None:
        env = list(last_wins([*env, *cache.env]))  # the cache homes win over a runtime's
        volumes.append(cache.volume)
        mounts.append(Mount(cache.volume.name, CACHE_MOUNT_PATH, cache.read_only))
    container: Obj = {
        "name": "serving",
        "image": plan.image,
        "args": list(plan.args),
        "env": [env_var(e) for e in env],
        "ports": [{"name": plan.port_name, "containerPort": plan.port, "protocol": "TCP"}],
        "resources": _resources(plan),
        "readinessProbe": probe(plan.readiness),
        "startupProbe": probe(plan.startup),
        "volumeMounts": [volume_mount(m) for m in mounts],
    }
    if not container["args"]:
        del container["args"]
    if not container["env"]:
        del container["env"]
    liveness = probe(plan.liveness) if plan.liveness is not None else None
    if liveness:  # a liveness probe with nothing set is no probe at all
        container["livenessProbe"] = liveness
    if plan.security_context is not None:
        container["securityContext"] = copied(plan.security_context)
    if plan.prestop_sleep_seconds is not None:
        container["lifecycle"] = {
            "preStop": {
                "exec": {"command": ["/bin/sh", "-c", f"sleep {plan.prestop_sleep_seconds}"]}
            }
        }
    pod: Obj = {
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": [volume(v) for v in volumes],
    }
    if plan.termination_grace_seconds is not None:
        pod["terminationGracePeriodSeconds"] = plan.termination_grace_seconds
    if plan.pod_security_context is not None:
        pod["securityContext"] = pod_security_context(plan.pod_security_context)
    set_image_pull_secrets(pod, plan.image_pull_secrets)
    apply_scheduling(pod, plan.scheduling)
    if fetcher is not None:
        fetch, fetch_volumes = fetch_container(fetcher, FETCH_MODEL)
        fetch["securityContext"] = fetcher_root_identity()
        pod["initContainers"] = [fetch]
        pod["volumes"] += fetch_volumes
    elif cache is not None and cache.ready_marker:
        wait: Obj = {
            "name": WAIT_FOR_PREWARM,
            "image": plan.image,
            "command": list(python_command(wait_for_marker_program(cache.ready_marker))),
            "volumeMounts": [mount(CACHE_VOLUME_NAME, CACHE_MOUNT_PATH, read_only=True)],
        }
        if "securityContext" in container:  # the same image, held to the same level
            wait["securityContext"] = container["securityContext"]
        pod["initContainers"] = [wait]
    obj = new_object("apps/v1", "Deployment", svc.name, svc.namespace, labels)
    obj["spec"] = {
        "selector": {"matchLabels": selector_labels(svc)},
        "template": {"metadata": template_metadata(labels, plan.scheduling), "spec": pod},
    }
    return obj


def render_backend_service(svc: ServiceIdentity, plan: BackendPlan) -> Obj:
    labels = selector_labels(svc)
    obj = new_object("v1", "Service", svc.backend_service, svc.namespace, labels)
    obj["spec"] = {
        "selector": labels,
        "ports": [{"name": "http", "port": 80, "targetPort": plan.port_name, "protocol": "TCP"}],
    }
    return obj
