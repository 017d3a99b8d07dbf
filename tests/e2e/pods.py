"""Waits for the exact state of a Deployment's pods. A count of Ready pods, or a Deployment's
`available == replicas`, also holds in the middle of a rollout (a pod of the older template not
yet told to go, or one being deleted beside its replacement), so a test that reads "the pod"
right after such a wait can find two; these wait until the older ones are gone."""

from __future__ import annotations

from kubernetes import client as k8s_client

from .workloads import wait_for

SERVICE_NAME = "demo"  # the example's LLMService, which every test serves under its name
BACKEND_PODS = f"app.kubernetes.io/name={SERVICE_NAME},serving.noctaya.io/runtime"
"""The label selector of the example service's backend pods (not its prewarm Job's)."""
GATEWAY_PODS = f"serving.noctaya.io/gateway={SERVICE_NAME}"
TEMPLATE_HASH = "pod-template-hash"
_REVISION = "deployment.kubernetes.io/revision"


def is_ready(pod: k8s_client.V1Pod) -> bool:
    conditions = (pod.status and pod.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def live_pods(
    api_client: k8s_client.ApiClient, namespace: str, selector: str
) -> list[k8s_client.V1Pod]:
    """The pods `selector` finds that are not being deleted, by name."""
    pods = k8s_client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector=selector)
    return sorted(
        (pod for pod in pods.items if not pod.metadata.deletion_timestamp),
        key=lambda pod: str(pod.metadata.name),
    )


def rolled_out(
    api_client: k8s_client.ApiClient, namespace: str, name: str, replicas: int | None = None
) -> list[k8s_client.V1Pod] | None:
    """The Deployment's pods once it has rolled out (to `replicas`, if given): its status has
    seen its spec and counts that many pods, each updated, ready and available, and the only
    pods left are of its current template, Ready; None until then."""
    apps = k8s_client.AppsV1Api(api_client)
    try:
        found = apps.read_namespaced_deployment(name, namespace)
    except k8s_client.ApiException as error:
        if error.status == 404:  # not created yet
            return None
        raise
    want, state = found.spec.replicas, found.status
    if state is None or (replicas is not None and want != replicas):
        return None
    if (state.observed_generation or 0) < found.metadata.generation:
        return None
    counts = (
        state.replicas,
        state.updated_replicas,
        state.ready_replicas,
        state.available_replicas,
    )
    if any((count or 0) != want for count in counts):
        return None
    selector = ",".join(f"{k}={v}" for k, v in found.spec.selector.match_labels.items())
    current = _template_hash(apps, found, namespace, selector)
    pods = live_pods(api_client, namespace, selector)
    if current is None or len(pods) != want:
        return None
    if any(pod.metadata.labels.get(TEMPLATE_HASH) != current or not is_ready(pod) for pod in pods):
        return None
    return pods


def ready_gateways(api_client: k8s_client.ApiClient, namespace: str) -> list[k8s_client.V1Pod]:
    """The service's gateway pods that are Ready and not being deleted, by name."""
    return [pod for pod in live_pods(api_client, namespace, GATEWAY_PODS) if is_ready(pod)]


def settled_gateways(
    api_client: k8s_client.ApiClient, namespace: str, count: int
) -> list[k8s_client.V1Pod]:
    """The service's `count` gateway pods, Ready, once its gateway Deployment has rolled out."""
    return wait_for(
        f"{count} Ready gateway(s), rolled out",
        lambda: rolled_out(api_client, namespace, f"{SERVICE_NAME}-gateway", count),
        timeout=180,
    )


def one_ready_backend(
    api_client: k8s_client.ApiClient,
    namespace: str,
    *,
    not_on: str | None = None,
    timeout: float = 180,
) -> k8s_client.V1Pod:
    """The service's one backend pod, Ready (on a node other than `not_on`, if given), once no
    other is left but those being deleted: a pod scaled away or evicted may still be
    terminating beside its replacement."""

    def one() -> k8s_client.V1Pod | None:
        pods = live_pods(api_client, namespace, BACKEND_PODS)
        if len(pods) != 1 or not is_ready(pods[0]) or pods[0].spec.node_name == not_on:
            return None
        return pods[0]

    where = f" off {not_on}" if not_on else ""
    return wait_for(f"one Ready backend pod{where}", one, timeout)


def routed(api_client: k8s_client.ApiClient, namespace: str, service: str) -> set[str]:
    """The pods the Service's EndpointSlices list as ready: where kube-proxy and the API
    server's service proxy may send a request (they skip an endpoint whose `ready` is false)."""
    slices = k8s_client.DiscoveryV1Api(api_client).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    return {
        str(endpoint.target_ref.name)
        for found in slices.items
        for endpoint in found.endpoints or []
        if endpoint.target_ref is not None
        and (endpoint.conditions is None or endpoint.conditions.ready is not False)
    }


def _template_hash(
    apps: k8s_client.AppsV1Api, deployment: k8s_client.V1Deployment, namespace: str, selector: str
) -> str | None:
    """The pod-template-hash of the Deployment's current ReplicaSet (the one of its revision)."""
    revision = (deployment.metadata.annotations or {}).get(_REVISION)
    for replica_set in apps.list_namespaced_replica_set(namespace, label_selector=selector).items:
        if (replica_set.metadata.annotations or {}).get(_REVISION) == revision:
            return str(replica_set.metadata.labels.get(TEMPLATE_HASH))
    return None
