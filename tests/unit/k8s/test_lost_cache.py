"""When a node-local cache's copy counts as lost, and when a prewarm Job filled another claim."""

from __future__ import annotations

from typing import Any

import pytest
from noctaya.k8s.lost_cache import pinned_hostnames, waiting_to_be_scheduled
from noctaya.k8s.prewarm_identity import (
    FILLED_CLAIM_ANNOTATION,
    filled_another_claim,
    filling,
)

Manifest = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"


def volume(*terms: list[Manifest]) -> Manifest:
    """A PersistentVolume whose required node affinity has these terms (their expressions)."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]}
    return {"spec": {"nodeAffinity": {"required": selector}}}


def host_in(*hosts: str) -> Manifest:
    return {"key": HOSTNAME, "operator": "In", "values": list(hosts)}


ZONE = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}


@pytest.mark.parametrize(
    ("pv", "hosts"),
    [
        (volume([host_in("node-a")]), {"node-a"}),
        (volume([host_in("node-a", "node-b")]), {"node-a", "node-b"}),
        (volume([host_in("node-a"), ZONE]), {"node-a"}),
        (volume([host_in("node-a")], [host_in("node-b")]), {"node-a", "node-b"}),
        (volume([host_in("node-a", "node-b"), host_in("node-b")]), {"node-b"}),
    ],
    ids=["one-node", "two-nodes", "node-in-a-zone", "alternative-nodes", "both-requirements"],
)
def test_a_volume_confined_to_named_hosts_is_pinned_to_them(pv: Manifest, hosts: set[str]) -> None:
    assert pinned_hostnames(pv) == hosts


@pytest.mark.parametrize(
    "pv",
    [
        {"spec": {"nfs": {"server": "nfs.example", "path": "/models"}}},
        volume([ZONE]),
        volume([host_in("node-a")], [ZONE]),
        volume([{"key": HOSTNAME, "operator": "NotIn", "values": ["node-a"]}]),
    ],
    ids=["no-affinity", "zone", "node-or-zone", "anywhere-but-a-node"],
)
def test_a_volume_usable_on_unnamed_nodes_is_pinned_to_none(pv: Manifest) -> None:
    """Only a copy no other node can reach is lost with its node: a zone's volume follows."""
    assert pinned_hostnames(pv) == frozenset()


def pod(
    *, node: str | None = None, reason: str = "Unschedulable", deleting: bool = False
) -> Manifest:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": reason}
    metadata = {"deletionTimestamp": "2025-01-01T00:00:00Z"} if deleting else {}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node} if node else {},
        "status": {"conditions": [scheduled]},
    }


def test_a_backend_pod_that_fits_no_node_is_waiting_to_be_scheduled() -> None:
    assert waiting_to_be_scheduled([pod(node="node-b"), pod()])


@pytest.mark.parametrize(
    "pods",
    [
        [],
        [pod(node="node-a")],
        [pod(reason="SchedulerError")],
        [pod(deleting=True)],
        [{"metadata": {}, "spec": {}, "status": {"phase": "Pending"}}],
    ],
    ids=["no-pods", "scheduled", "not-unschedulable", "terminating", "not-tried-yet"],
)
def test_pods_on_a_node_or_not_yet_refused_one_wait_for_nothing(pods: list[Manifest]) -> None:
    assert not waiting_to_be_scheduled(pods)


def claim(uid: str) -> Manifest:
    return {"metadata": {"name": "chat-cache", "uid": uid}}


JOB = {"metadata": {"name": "chat-prewarm", "annotations": {"a": "b"}}, "spec": {}}


def test_a_job_created_for_a_claim_records_that_claim_and_keeps_its_annotations() -> None:
    created = filling(JOB, claim("uid-1"))
    assert created["metadata"]["annotations"] == {"a": "b", FILLED_CLAIM_ANNOTATION: "uid-1"}
    assert JOB["metadata"]["annotations"] == {"a": "b"}  # the rendered object is not changed
    assert not filled_another_claim(created, claim("uid-1"))


def test_a_job_that_filled_a_claim_since_replaced_filled_another_claim() -> None:
    assert filled_another_claim(filling(JOB, claim("uid-1")), claim("uid-2"))


@pytest.mark.parametrize(
    ("job", "current"),
    [(JOB, claim("uid-2")), (filling(JOB, None), None)],
    ids=["recorded-no-claim", "host-path-cache"],
)
def test_a_job_without_a_recorded_claim_is_kept(job: Manifest, current: Manifest | None) -> None:
    """A Job from before the record, or another implementation's, is create-once as ever."""
    assert not filled_another_claim(job, current)
