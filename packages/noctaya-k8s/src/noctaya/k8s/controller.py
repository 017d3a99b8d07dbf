"""The LLMService controller: which changes wake which service.

A service is reconciled when it changes, when an InferenceRuntime it names or whose vendor it
selects changes, when an object it controls changes (the ScaledObject only on spec edits, so
KEDA's status churn costs nothing), and when one of its backend Pods changes.
"""

from __future__ import annotations

from kubernetes.client import ApiClient
from noctaya.core.api import API_GROUP
from noctaya.core.plugins import VendorRegistry
from noctaya.core.runtime_selection import may_choose
from noctaya.k8s import kinds
from noctaya.k8s.reader import CachedReader
from noctaya.k8s.reconciler import LLMServiceReconciler, OperatorSettings
from noctaya.k8s.render.labels import LLMSERVICE, MANAGED_BY, MANAGER, RUNTIME
from noctaya.k8s.runtime.handlers import Mapper, controller_owner, generation_changed
from noctaya.k8s.runtime.manager import Manager, ManagerOptions
from noctaya.k8s.runtime.resources import ResourceKind
from noctaya.k8s.runtime.store import KubeObject, ObjectKey, Store, object_key

MANAGED = f"{MANAGED_BY}={MANAGER}"
BACKEND_PODS = f"{MANAGED},{LLMSERVICE},{RUNTIME}"
"""Pods carrying both labels: backend pods only (gateway and prewarm pods lack the runtime)."""
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


def backend_pod_owner(pod: KubeObject) -> list[ObjectKey]:
    labels = pod.get("metadata", {}).get("labels") or {}
    if labels.get(MANAGED_BY) != MANAGER or not labels.get(RUNTIME) or not labels.get(LLMSERVICE):
        return []
    return [(str(pod["metadata"].get("namespace") or ""), labels[LLMSERVICE])]


def build_controller(
    api_client: ApiClient,
    settings: OperatorSettings,
    options: ManagerOptions | None = None,
    vendors: VendorRegistry | None = None,
) -> tuple[Manager, LLMServiceReconciler]:
    manager = Manager(api_client, options)
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
    stores[kinds.SCALED_OBJECT] = manager.watch(
        kinds.SCALED_OBJECT.api_version,
        kinds.SCALED_OBJECT.kind,
        to_keys=owner,
        update_predicate=generation_changed,
        label_selector=MANAGED,
    )
    stores[kinds.POD] = manager.watch(
        kinds.POD.api_version,
        kinds.POD.kind,
        to_keys=backend_pod_owner,
        label_selector=BACKEND_PODS,
    )
    reconciler = LLMServiceReconciler(
        manager.resolver,
        vendors or VendorRegistry.discover(),
        settings,
        reader=CachedReader(stores),
    )
    return manager, reconciler
