"""The LLMService controller: which changes wake which service.

A service is reconciled when it changes, when an InferenceRuntime it names or whose vendor it
selects changes, when an object it controls changes (the ScaledObject only on spec edits and
when KEDA's `Ready` verdict changes, so the rest of KEDA's status churn costs nothing), when
one of its backend, gateway or prewarm Pods changes, when the kubelet reports a volume it
cannot mount for one of its gateway Pods, and when the Job controller cannot create a pod of its
prewarm Job (Pod Security admission refused it, for one). The gateway's endpoint reader
(ServiceAccount, Role, RoleBinding) is watched where the operator may list it: a platform that
withholds that RBAC leaves those caches empty and the services serving without it. Nodes are
not watched: a service whose
backend waits for the node of its `NodeLocalPVC` cache asks to be reconciled again in a while
(`noctaya.k8s.lost_cache`).

`build_controller` is where the operator is wired: the one place that picks the cluster's
adapters (its runtimes, its workloads) for the reconciler, which sees them only through the
core's ports.
"""

from __future__ import annotations

from kubernetes.client import ApiClient
from noctaya.core.api import API_GROUP
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import may_choose
from noctaya.k8s import kinds
from noctaya.k8s.apply import Applier
from noctaya.k8s.events import EventRecorder
from noctaya.k8s.lost_cache import LookAgain, LostCacheNodes, looked_at_by_caller
from noctaya.k8s.observe import JOB_CREATE_EVENTS, MOUNT_EVENTS
from noctaya.k8s.planning import ServicePlanner
from noctaya.k8s.reader import ApiReader, CachedReader, Reader
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.render.labels import GATEWAY, LLMSERVICE, MANAGED_BY, MANAGER
from noctaya.k8s.runtime.handlers import Mapper, controller_owner, generation_changed
from noctaya.k8s.runtime.manager import Manager, ManagerOptions
from noctaya.k8s.runtime.resources import ResourceKind, ResourceResolver
from noctaya.k8s.runtime.store import KubeObject, ObjectKey, Store, object_key
from noctaya.k8s.workloads import ClusterWorkloads

MANAGED = f"{MANAGED_BY}={MANAGER}"
_OWNED = (kinds.DEPLOYMENT, kinds.SERVICE, kinds.PVC, kinds.SECRET, kinds.JOB, kinds.PDB)


def services_using_runtime(services: Store) -> Mapper:
    """An InferenceRuntime concerns every service whose selection may choose it.

    Read from the cached objects as they are: decoding every service on each runtime event
    would cost more than the reconciles it saves.
    """

    def keys(runtime: KubeObject) -> list[ObjectKey]:
        name = str(runtime.get("metadata", {}).get("name") or "")
        vendor = runtime.get("spec", {}).get("vendor")
        matched = []
        for service in services.list():
            selection = service.get("spec", {}).get("runtime") or {}
            vendors = (selection.get("selector") or {}).get("vendor") or []
            if may_choose(selection.get("name"), vendors, name, vendor):
                matched.append(object_key(service))
        return matched

    return keys


def pod_owner(pod: KubeObject) -> list[ObjectKey]:
    """The service of a backend or prewarm pod (its llmservice label) or of a gateway pod (its
    gateway label); the demand aggregator's pods concern no status."""
    labels = pod.get("metadata", {}).get("labels") or {}
    service = labels.get(LLMSERVICE) or labels.get(GATEWAY)
    if labels.get(MANAGED_BY) != MANAGER or not service:
        return []
    return [(str(pod["metadata"].get("namespace") or ""), service)]


def event_pod_owner(pods: Store) -> Mapper:
    """A kubelet event about a pod concerns that pod's service, if the pod is one of ours."""
    return _event_about(pods, pod_owner)


def event_job_owner(jobs: Store, owner: Mapper) -> Mapper:
    """The Job controller's event about a Job concerns the service that owns the Job."""
    return _event_about(jobs, owner)


def _event_about(objects: Store, owner: Mapper) -> Mapper:
    """An event concerns the service of the cached object it is about (`owner` maps it)."""

    def keys(event: KubeObject) -> list[ObjectKey]:
        regarding = event.get("regarding") or {}
        namespace = str(regarding.get("namespace") or "")
        found = objects.get((namespace, str(regarding.get("name") or "")))
        return list(owner(found)) if found is not None else []

    return keys


def spec_or_readiness_changed(old: KubeObject, new: KubeObject) -> bool:
    """A ScaledObject's spec edits, and KEDA's `Ready` verdict on it: the rest of its status
    (activity, last active time, health counters) changes often and says nothing we report."""
    return generation_changed(old, new) or _ready(old) != _ready(new)


def _ready(obj: KubeObject) -> tuple[object, ...]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return (condition.get("status"), condition.get("reason"), condition.get("message"))
    return ()


def build_controller(
    api_client: ApiClient,
    settings: OperatorSettings,
    options: ManagerOptions | None = None,
    vendors: VendorRegistry | None = None,
) -> tuple[Manager, LLMServiceReconciler]:
    """The operator as `noctaya-operator` runs it: the manager's watches, and a reconciler that
    reads from their caches."""
    manager = Manager(api_client, options)
    reader = _watch(manager)
    return manager, cluster_reconciler(
        manager.resolver,
        reader,
        vendors or VendorRegistry.discover(),
        settings,
        look_again=manager.queue.add_after,
    )


def cluster_reconciler(
    resolver: ResourceResolver,
    reader: Reader,
    vendors: VendorRegistry,
    settings: OperatorSettings,
    *,
    look_again: LookAgain = looked_at_by_caller,
) -> LLMServiceReconciler:
    """A reconciler over the cluster's adapters, each reading through `reader` (the watch
    caches in the operator, the API server itself in tests that drive it key by key)."""
    applier = Applier(resolver, reader)
    lost_cache_nodes = LostCacheNodes(
        applier, reader, ApiReader(resolver), EventRecorder(resolver), look_again
    )
    workloads = ClusterWorkloads(applier, reader, lost_cache_nodes)
    planner = ServicePlanner(reader, vendors, settings)
    return LLMServiceReconciler(resolver, reader, planner, workloads)


def _watch(manager: Manager) -> CachedReader:
    """Watch what wakes a service; the reader over those watches' caches."""
    stores: dict[ResourceKind, Store] = {}
    services = stores[kinds.LLMSERVICE] = manager.watch(
        kinds.LLMSERVICE.api_version, kinds.LLMSERVICE.kind
    )
    stores[kinds.INFERENCE_RUNTIME] = manager.watch(
        kinds.INFERENCE_RUNTIME.api_version,
        kinds.INFERENCE_RUNTIME.kind,
        to_keys=services_using_runtime(services),
    )
    owner = controller_owner(API_GROUP, kinds.LLMSERVICE.kind)
    for kind in _OWNED:
        stores[kind] = manager.watch(
            kind.api_version, kind.kind, to_keys=owner, label_selector=MANAGED
        )
    for kind in kinds.ENDPOINT_ACCESS:
        stores[kind] = manager.watch(
            kind.api_version,
            kind.kind,
            to_keys=owner,
            label_selector=MANAGED,
            forbidden_is_empty=True,
        )
    stores[kinds.SCALED_OBJECT] = manager.watch(
        kinds.SCALED_OBJECT.api_version,
        kinds.SCALED_OBJECT.kind,
        to_keys=owner,
        update_predicate=spec_or_readiness_changed,
        label_selector=MANAGED,
    )
    pods = stores[kinds.POD] = manager.watch(
        kinds.POD.api_version, kinds.POD.kind, to_keys=pod_owner, label_selector=MANAGED
    )
    events = [
        manager.watch(
            kinds.EVENT.api_version,
            kinds.EVENT.kind,
            to_keys=event_pod_owner(pods),
            field_selector=MOUNT_EVENTS,
        ),
        manager.watch(
            kinds.EVENT.api_version,
            kinds.EVENT.kind,
            to_keys=event_job_owner(stores[kinds.JOB], owner),
            field_selector=JOB_CREATE_EVENTS,
        ),
    ]
    return CachedReader({**stores, kinds.EVENT: events})
