"""Event handlers: which reconcile keys an add, update or delete of a watched object wakes."""

from __future__ import annotations

from typing import Any

from noctaya.k8s.runtime import (
    EnqueueMapped,
    WorkQueue,
    controller_owner,
    generation_changed,
    own_key,
)
from noctaya.k8s.runtime.store import Store

OWNER_GROUP, OWNER_KIND = "serving.noctaya.io", "LLMService"


def obj(name: str, namespace: str = "ns", **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, **metadata}}


def owner_ref(
    name: str,
    controller: bool = True,
    api_version: str = "serving.noctaya.io/v1alpha1",
    kind: str = OWNER_KIND,
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": "u",
        "controller": controller,
    }


def queued(queue: WorkQueue[tuple[str, str]]) -> list[tuple[str, str]]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_primary_objects_map_to_their_own_key_and_cluster_scoped_ones_to_an_empty_namespace() -> (
    None
):
    assert own_key(obj("svc")) == [("ns", "svc")]
    assert own_key({"metadata": {"name": "vllm"}}) == [("", "vllm")]


def test_an_owned_object_maps_to_its_controller_owner_of_the_right_kind_in_any_version() -> None:
    to_owner = controller_owner(OWNER_GROUP, OWNER_KIND)
    deployment = obj(
        "svc-gateway",
        ownerReferences=[
            owner_ref("other", controller=False),
            owner_ref("svc", api_version="serving.noctaya.io/v1beta1"),
        ],
    )
    assert to_owner(deployment) == [("ns", "svc")]


def test_objects_without_a_matching_controller_owner_map_to_nothing() -> None:
    to_owner = controller_owner(OWNER_GROUP, OWNER_KIND)
    assert to_owner(obj("plain")) == []
    assert to_owner(obj("bystander", ownerReferences=[owner_ref("svc", controller=False)])) == []
    assert (
        to_owner(
            obj("rs", ownerReferences=[owner_ref("d", api_version="apps/v1", kind="Deployment")])
        )
        == []
    )
    assert (
        to_owner(obj("foreign", ownerReferences=[owner_ref("svc", api_version="example.com/v1")]))
        == []
    )


def test_generation_changed_tells_spec_edits_from_status_and_label_churn() -> None:
    assert generation_changed(obj("so", generation=1), obj("so", generation=2))
    assert not generation_changed(
        obj("so", generation=2), obj("so", generation=2, labels={"a": "b"})
    )


def test_an_update_wakes_the_keys_of_both_the_old_and_the_new_object() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue()
    handler = EnqueueMapped(queue, controller_owner(OWNER_GROUP, OWNER_KIND))
    handler.on_update(
        obj("job", ownerReferences=[owner_ref("before")]),
        obj("job", ownerReferences=[owner_ref("after")]),
    )
    assert sorted(queued(queue)) == [("ns", "after"), ("ns", "before")]


def test_a_rejected_update_enqueues_nothing_but_adds_and_deletes_always_pass() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue()
    handler = EnqueueMapped(queue, own_key, update_predicate=generation_changed)
    handler.on_update(obj("so", generation=3), obj("so", generation=3))
    assert queued(queue) == []
    handler.on_add(obj("so", generation=3))
    handler.on_delete(obj("gone", generation=3))
    assert queued(queue) == [("ns", "so"), ("ns", "gone")]


def test_a_mapper_can_fan_out_to_every_object_in_another_cache() -> None:
    """How a runtime change reaches every service that names it (the mapper reads a store)."""
    services = Store()
    for name, runtime in (("a", "vllm"), ("b", "other"), ("c", "vllm")):
        services.put({"metadata": {"name": name, "namespace": "ns"}, "spec": {"runtime": runtime}})

    def services_naming(runtime: dict[str, Any]) -> list[tuple[str, str]]:
        name = runtime["metadata"]["name"]
        return [
            ("ns", s["metadata"]["name"]) for s in services.list() if s["spec"]["runtime"] == name
        ]

    queue: WorkQueue[tuple[str, str]] = WorkQueue()
    EnqueueMapped(queue, services_naming).on_add({"metadata": {"name": "vllm"}})
    assert sorted(queued(queue)) == [("ns", "a"), ("ns", "c")]
