"""The informer cache: lookups, and what a relist reports as changed."""

from __future__ import annotations

from typing import Any

from noctaya.k8s.runtime.store import Store


def obj(name: str, version: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}}


def names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def test_a_relist_reports_added_changed_and_deleted_objects_but_not_unchanged_ones() -> None:
    store = Store()
    store.replace([obj("kept", "1"), obj("changed", "1"), obj("removed", "1")])

    diff = store.replace([obj("kept", "1"), obj("changed", "7"), obj("created", "8")])

    assert names(diff.added) == ["created"]
    assert [
        (old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"])
        for old, new in diff.updated
    ] == [("1", "7")]
    assert names(diff.deleted) == ["removed"]
    assert names(store.list()) == ["changed", "created", "kept"]


def test_lookups_by_key_and_by_namespace() -> None:
    store = Store()
    store.put(obj("a", "1", namespace="one"))
    store.put(obj("b", "1", namespace="two"))
    store.put({"metadata": {"name": "cluster-wide", "resourceVersion": "1"}})
    assert store.get(("one", "a")) == obj("a", "1", namespace="one")
    assert store.get(("", "cluster-wide")) is not None
    assert store.get(("two", "a")) is None
    assert names(store.list("two")) == ["b"]
    assert len(store) == 3


def test_put_returns_the_replaced_object_and_pop_removes_it() -> None:
    store = Store()
    assert store.put(obj("a", "1")) is None
    assert store.put(obj("a", "2")) == obj("a", "1")
    assert store.pop(("ns", "a")) == obj("a", "2")
    assert store.pop(("ns", "a")) is None
