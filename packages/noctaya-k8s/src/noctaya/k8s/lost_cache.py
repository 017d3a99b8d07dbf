"""A `NodeLocalPVC` cache whose node is gone: given up, so the model is fetched again elsewhere.

A node-local volume (local-path-provisioner's, a `local` PersistentVolume) is pinned by its
required node affinity to one node's `kubernetes.io/hostname`. While that node is drained,
cordoned or unreachable, the copy may come back with it, so nothing is done: the service
reports why its backend waits and the user decides. Once no Node carries the hostname any
more, the copy went with it and the backend would wait for that node forever. Then the claim
is deleted, with the prewarm Job that filled it (in the background, so its pods go too), and
the reconcile creates both again: the new claim binds on the node the next backend (or the
Job) is scheduled to, and the model is fetched there.

Deleting the claim frees it once no scheduled pod uses it: Kubernetes' pvc-protection only
counts pods bound to a node. A pod bound to the deleted node is removed by the pod garbage
collector; a backend pod still waiting to be scheduled holds nothing, and is scheduled with
the new claim of the same name.

The node is looked up only while a backend pod waits to be scheduled, the one state in which a
lost node matters: the volume and the Nodes are not watched (a cluster's Nodes are large
objects, and only a waiting service needs them). No watched object changes when the node is
deleted, so a waiting service whose node is still there is looked at again after
`RECHECK_INTERVAL`. A failed request fails the step of the object it concerns: the claim's
(`ApplyCachePVC`, its volume and Nodes included) or the Job's (`ApplyPrewarmJob`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from noctaya.core.plan.serving import ServingPlan
from noctaya.core.status import StatusEvent
from noctaya.k8s import kinds
from noctaya.k8s.apply import Applier, controlled_by
from noctaya.k8s.events import EventRecorder
from noctaya.k8s.planning import api_step
from noctaya.k8s.reader import ApiReader, KubeObject, Reader
from noctaya.k8s.render.labels import backend_pod_selector
from noctaya.k8s.runtime.store import ObjectKey

HOSTNAME_LABEL = "kubernetes.io/hostname"
RECHECK_INTERVAL = 30.0
"""Seconds between looks at the node of a waiting backend's cache: how late a deleted node is
noticed, against two API requests per look."""

LookAgain = Callable[[ObjectKey, float], None]
"""Reconcile the service `(namespace, name)` again after so many seconds."""


def looked_at_by_caller(_key: ObjectKey, _delay: float) -> None:
    """For a reconciler driven key by key, as tests drive one: there is no queue to come back
    to, whoever drives it reconciles again when it chooses."""


def pinned_hostnames(volume: KubeObject) -> frozenset[str]:
    """The hostnames a PersistentVolume's required node affinity confines it to; empty when it
    may be used on other nodes too (no affinity, a zone, a term that names no host).

    Terms are alternatives, so each must name hosts; within a term every hostname `In`
    requirement applies.
    """
    required = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    terms = required.get("nodeSelectorTerms") or []
    hosts: set[str] = set()
    for term in terms:
        named = [
            frozenset(requirement.get("values") or ())
            for requirement in term.get("matchExpressions") or []
            if requirement.get("key") == HOSTNAME_LABEL and requirement.get("operator") == "In"
        ]
        if not named:
            return frozenset()
        hosts |= frozenset.intersection(*named)
    return frozenset(hosts)


def waiting_to_be_scheduled(pods: Iterable[KubeObject]) -> bool:
    """Whether a pod has been found to fit no node and is still asking for one."""
    return any(
        not (pod.get("spec") or {}).get("nodeName")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and any(
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
            for condition in (pod.get("status") or {}).get("conditions") or []
        )
        for pod in pods
    )


def _names(hosts: Iterable[str]) -> str:
    return ", ".join(f'"{host}"' for host in sorted(hosts))


class LostCacheNodes:
    """Gives up the `NodeLocalPVC` claim of a service whose node no longer exists.

    `reader` is the reconcile's (the watch caches in the operator); the volume and the Nodes,
    which are not watched, are read from the API server.
    """

    def __init__(
        self,
        applier: Applier,
        reader: Reader,
        api: ApiReader,
        events: EventRecorder,
        look_again: LookAgain,
    ) -> None:
        self._applier = applier
        self._reader = reader
        self._api = api
        self._events = events
        self._look_again = look_again

    def give_up_if_lost(self, plan: ServingPlan, owner: KubeObject) -> None:
        """Delete the claim and the prewarm Job when the claim's node is gone; ask to look
        again later while a waiting backend's node is only unavailable."""
        svc = plan.service
        hosts = self._pinned_hosts_while_waiting(plan, owner)
        if not hosts:
            return
        if any(self._node_exists(host) for host in hosts):
            self._look_again((svc.namespace, svc.name), RECHECK_INTERVAL)
            return
        uid = owner["metadata"]["uid"]
        if not api_step(
            "ApplyCachePVC",
            lambda: self._applier.delete_if_controlled(
                kinds.PVC, svc.namespace, svc.cache_claim, uid
            ),
        ):
            return  # gone meanwhile: whoever deleted it gave the copy up
        deleted = [f"PersistentVolumeClaim {svc.cache_claim}"]
        if api_step(
            "ApplyPrewarmJob",
            lambda: self._applier.delete_if_controlled(
                kinds.JOB, svc.namespace, svc.prewarm_job, uid
            ),
        ):
            deleted.append(f"Job {svc.prewarm_job}")
        note = (
            f"The NodeLocalPVC cache's volume belongs to node {_names(hosts)}, which no longer "
            f"exists: deleted {' and '.join(deleted)}; the model is fetched again on the node "
            "the next backend Pod is scheduled to"
        )
        self._events.record(owner, StatusEvent("Warning", "CacheNodeLost", "DeleteCachePVC", note))

    def _pinned_hosts_while_waiting(self, plan: ServingPlan, owner: KubeObject) -> frozenset[str]:
        """The hosts the service's bound claim is pinned to, when a backend pod waits to be
        scheduled; empty otherwise (nothing waits, or the claim is unbound, being deleted, not
        this service's, or on a volume other nodes can use)."""
        svc, reader = plan.service, self._reader
        pods = api_step(
            "ObserveBackendPods",
            lambda: reader.list(kinds.POD, svc.namespace, backend_pod_selector(svc, plan.runtime)),
        )
        if not waiting_to_be_scheduled(pods):
            return frozenset()
        claim = api_step(
            "ApplyCachePVC", lambda: reader.get(kinds.PVC, svc.namespace, svc.cache_claim)
        )
        if (
            claim is None
            or claim["metadata"].get("deletionTimestamp")
            or not controlled_by(claim, owner["metadata"]["uid"])
        ):
            return frozenset()
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if not volume_name:
            return frozenset()
        volume = api_step("ApplyCachePVC", lambda: self._api.get(kinds.PV, "", volume_name))
        return frozenset() if volume is None else pinned_hostnames(volume)

    def _node_exists(self, hostname: str) -> bool:
        """A Node carrying the hostname label: the affinity names the label, which is the Node's
        name only where the kubelet's hostname is (cloud providers name Nodes otherwise)."""
        selector = f"{HOSTNAME_LABEL}={hostname}"
        return bool(api_step("ApplyCachePVC", lambda: self._api.list(kinds.NODE, "", selector)))
