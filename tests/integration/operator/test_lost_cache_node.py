"""A `NodeLocalPVC` cache whose node is gone is given up and made again; one whose node is only
unavailable is kept; a prewarm Job that filled a replaced claim is run again for the new one.

There is no scheduler, volume binder or controller-manager: the scenario binds the claim to a
node-pinned volume as local-path-provisioner would, reports the backend pod unschedulable as the
scheduler would, and removes the claim's pvc-protection finalizer as that controller would once
no scheduled pod uses the claim (the waiting backend pod is not scheduled, so it holds nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client as k8s_client
from noctaya.k8s import lost_cache
from noctaya.k8s.lost_cache import HOSTNAME_LABEL, RECHECK_INTERVAL
from noctaya.k8s.prewarm_identity import FILLED_CLAIM_ANNOTATION
from noctaya.k8s.reconciler import LLMServiceReconciler
from noctaya.k8s.runtime.store import ObjectKey
from support.custom_resources import CustomResources, Manifest
from support.manifests import inference_runtime, llmservice

from .cluster import (
    backend_pod,
    create,
    events,
    eventually,
    patch,
    read,
    reconciled,
    replace_status,
    set_pod_status,
)
from .conftest import RunningController

pytestmark = pytest.mark.integration

SVC = "chat"
CLAIM = "chat-cache"
JOB = "chat-prewarm"
WAITING = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) had volume node affinity conflict.",
        }
    ],
}
NOT_READY = {
    "conditions": [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
    ]
}


def uid(obj: Manifest | None) -> str | None:
    return None if obj is None else str(obj["metadata"]["uid"])


@dataclass
class NodeLocalCache:
    """A service whose cache claim is bound to a volume on one node, and whose backend pod
    waits to be scheduled."""

    api_client: k8s_client.ApiClient
    namespace: str
    node: str
    hostname: str

    @property
    def volume(self) -> str:
        return f"{self.namespace}-cache-volume"

    def claim(self) -> Manifest | None:
        return read(self.api_client, "v1", "PersistentVolumeClaim", self.namespace, CLAIM)

    def job(self) -> Manifest | None:
        return read(self.api_client, "batch/v1", "Job", self.namespace, JOB)

    def bind_claim(self) -> None:
        """Provision a volume pinned to the node's hostname and bind the claim to it."""
        claim = self.claim()
        assert claim is not None
        pinned = {"key": HOSTNAME_LABEL, "operator": "In", "values": [self.hostname]}
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": self.volume},
            "spec": {
                "capacity": {"storage": "50Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/var/lib/local-path/{self.volume}"},
                "claimRef": {"namespace": self.namespace, "name": CLAIM, "uid": uid(claim)},
                "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [pinned]}]}
                },
            },
        }
        create(self.api_client, None, volume)
        spec = {"spec": {"volumeName": self.volume}}
        patch(self.api_client, "v1", "PersistentVolumeClaim", self.namespace, CLAIM, spec)
        bound = {
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "50Gi"},
        }
        replace_status(self.api_client, "v1", "PersistentVolumeClaim", self.namespace, CLAIM, bound)

    def release_claim(self) -> None:
        """What pvc-protection does for a deleted claim that no scheduled pod uses."""
        finalizers = {"metadata": {"finalizers": None}}
        patch(self.api_client, "v1", "PersistentVolumeClaim", self.namespace, CLAIM, finalizers)
        eventually(lambda: self.claim() is None, "the released claim to go")

    def lose_node(self) -> None:
        k8s_client.CoreV1Api(self.api_client).delete_node(self.node)

    def node_not_ready(self) -> None:
        replace_status(self.api_client, "v1", "Node", "", self.node, NOT_READY)

    def lost_events(self) -> list[Manifest]:
        return [
            e for e in events(self.api_client, self.namespace) if e["reason"] == "CacheNodeLost"
        ]


@pytest.fixture
def node_name(namespace: str) -> str:
    return f"{namespace}-node"


@pytest.fixture
def cache(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
    node_name: str,
    request: pytest.FixtureRequest,
) -> Iterator[NodeLocalCache]:
    """The service reconciled once (claim and prewarm Job created), its claim bound on the node
    `hostname` names (the node's own name unless the test says otherwise), its backend waiting.
    """
    hostname = getattr(request, "param", None) or node_name
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": {HOSTNAME_LABEL: hostname}},
    }
    create(api_client, None, node)
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice(SVC, changes), namespace)
    reconciler.reconcile((namespace, SVC))
    found = NodeLocalCache(api_client, namespace, node_name, hostname)
    found.bind_claim()
    backend_pod(api_client, namespace, SVC, runtime_name, f"{SVC}-7d9f-abcde")
    set_pod_status(api_client, namespace, f"{SVC}-7d9f-abcde", WAITING)
    yield found
    core = k8s_client.CoreV1Api(api_client)
    for delete, name in (
        (core.delete_node, node_name),
        (core.delete_persistent_volume, found.volume),
    ):
        try:
            delete(name)
        except k8s_client.ApiException as error:
            if error.status != 404:
                raise


def test_a_claim_whose_node_was_deleted_is_given_up_and_created_again(
    cache: NodeLocalCache, operator_reconciler: LLMServiceReconciler
) -> None:
    """With the operator's own RBAC: the claim and the Job that filled it are deleted, and
    created again once the claim is released; the new Job records the new claim."""
    old_claim, old_job = cache.claim(), cache.job()
    cache.lose_node()

    operator_reconciler.reconcile((cache.namespace, SVC))

    deleting = cache.claim()
    assert deleting is None or deleting["metadata"].get("deletionTimestamp")
    assert cache.job() is None
    assert cache.lost_events() == [
        {
            "type": "Warning",
            "reason": "CacheNodeLost",
            "action": "DeleteCachePVC",
            "note": f'The NodeLocalPVC cache\'s volume belongs to node "{cache.hostname}", which '
            f"no longer exists: deleted PersistentVolumeClaim {CLAIM} and Job {JOB}; the model is "
            "fetched again on the node the next backend Pod is scheduled to",
            "reportingController": "llmservice-controller",
            "regarding": SVC,
        }
    ]

    if deleting is not None:
        cache.release_claim()
    operator_reconciler.reconcile((cache.namespace, SVC))

    new_claim, new_job = cache.claim(), cache.job()
    assert new_claim is not None
    assert new_job is not None
    assert uid(new_claim) != uid(old_claim)
    assert uid(new_job) != uid(old_job)
    assert not new_claim["spec"].get("volumeName")  # binds wherever the next backend lands
    assert new_job["metadata"]["annotations"][FILLED_CLAIM_ANNOTATION] == uid(new_claim)
    assert len(cache.lost_events()) == 1


@pytest.mark.parametrize(
    "cache", [pytest.param(None, id="named-as-its-host"), "host-a.example.internal"], indirect=True
)
def test_a_claim_whose_node_is_not_ready_is_kept_and_looked_at_again(
    cache: NodeLocalCache, make_reconciler: Callable[..., LLMServiceReconciler]
) -> None:
    """An unreachable node may come back with the copy: it stays, whatever the Node is called,
    and the service asks to be reconciled again to see whether the node goes for good."""
    asked: list[tuple[ObjectKey, float]] = []
    reconciler = make_reconciler(look_again=lambda key, delay: asked.append((key, delay)))
    before = (uid(cache.claim()), uid(cache.job()))
    cache.node_not_ready()

    reconciler.reconcile((cache.namespace, SVC))

    claim = cache.claim()
    assert (uid(claim), uid(cache.job())) == before
    assert claim is not None
    assert not claim["metadata"].get("deletionTimestamp")
    assert cache.lost_events() == []
    assert asked == [((cache.namespace, SVC), RECHECK_INTERVAL)]


def test_a_claim_whose_node_is_gone_is_kept_while_no_backend_waits(
    cache: NodeLocalCache, reconciler: LLMServiceReconciler
) -> None:
    """Nothing is lost until a backend needs the cache: a scaled-down service keeps its claim."""
    k8s_client.CoreV1Api(cache.api_client).delete_namespaced_pod(
        f"{SVC}-7d9f-abcde", cache.namespace, grace_period_seconds=0
    )
    before = uid(cache.claim())
    cache.lose_node()

    reconciler.reconcile((cache.namespace, SVC))

    assert uid(cache.claim()) == before
    assert cache.lost_events() == []


def test_a_prewarm_job_that_filled_a_replaced_claim_is_created_again(
    api_client: k8s_client.ApiClient,
    resources: CustomResources,
    namespace: str,
    runtime_name: str,
    reconciler: LLMServiceReconciler,
) -> None:
    """A user gives up the copy by deleting the claim alone: the Job that filled the old claim
    is replaced, else the backend would wait for a marker the new claim never gets."""
    resources.create(inference_runtime(runtime_name))
    changes = {"runtime": {"name": runtime_name}, "cache": {"prewarm": True}}
    resources.create(llmservice(SVC, changes), namespace)
    reconciler.reconcile((namespace, SVC))
    cache = NodeLocalCache(api_client, namespace, node="", hostname="")
    first_claim, first_job = cache.claim(), cache.job()
    assert first_job is not None
    assert first_job["metadata"]["annotations"][FILLED_CLAIM_ANNOTATION] == uid(first_claim)

    reconciler.reconcile((namespace, SVC))
    assert uid(cache.job()) == uid(first_job)  # create-once while the claim is the same

    k8s_client.CoreV1Api(api_client).delete_namespaced_persistent_volume_claim(CLAIM, namespace)
    cache.release_claim()
    reconciler.reconcile((namespace, SVC))  # a new claim; the old Job goes
    reconciler.reconcile((namespace, SVC))  # woken by its deletion: a Job for the new claim

    claim, job = cache.claim(), cache.job()
    assert claim is not None
    assert job is not None
    assert uid(claim) != uid(first_claim)
    assert uid(job) != uid(first_job)
    assert job["metadata"]["annotations"][FILLED_CLAIM_ANNOTATION] == uid(claim)


def test_the_running_operator_notices_a_deleted_node_though_it_watches_no_node(
    cache: NodeLocalCache,
    resources: CustomResources,
    start_controller: Callable[..., RunningController],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deleting a Node changes nothing the operator watches: the waiting service is looked at
    again on its own, and the claim goes."""
    monkeypatch.setattr(lost_cache, "RECHECK_INTERVAL", 0.2)
    cache.node_not_ready()
    start_controller().wait_reconciling()
    eventually(lambda: reconciled(resources, cache.namespace, SVC), "the service's status")
    time.sleep(1.0)  # every write's watch event has woken the service by now
    assert cache.lost_events() == []

    cache.lose_node()

    eventually(cache.lost_events, "the operator to give up the lost node's claim")
