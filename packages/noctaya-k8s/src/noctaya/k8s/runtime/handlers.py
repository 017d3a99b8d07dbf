"""From watched objects to the reconcile keys they concern.

A watch is given a mapper (object -> keys) and optionally an update predicate (old, new ->
whether the update matters). Updates enqueue the keys of the old AND the new object, so a
change that moves an object away from a key (an owner reference or a vendor edited) still
wakes the key it left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .store import KubeObject, ObjectKey, object_key
from .workqueue import WorkQueue

Mapper = Callable[[KubeObject], Iterable[ObjectKey]]
UpdatePredicate = Callable[[KubeObject, KubeObject], bool]


def own_key(obj: KubeObject) -> list[ObjectKey]:
    """The object's own `(namespace, name)`: for the primary resource."""
    return [object_key(obj)]


def controller_owner(api_group: str, kind: str) -> Mapper:
    """Maps an object to its controller owner of `kind` in `api_group` (any version).

    Only the reference with `controller: true` counts: it is the one the operator sets on what
    it renders, and an owner reference someone else added does not make an object its own.
    """

    def owner_keys(obj: KubeObject) -> list[ObjectKey]:
        metadata = obj.get("metadata") or {}
        for ref in metadata.get("ownerReferences") or []:
            if (
                ref.get("controller") is True
                and ref.get("kind") == kind
                and _group(str(ref.get("apiVersion", ""))) == api_group
                and ref.get("name")
            ):
                return [(str(metadata.get("namespace") or ""), str(ref["name"]))]
        return []

    return owner_keys


def generation_changed(old: KubeObject, new: KubeObject) -> bool:
    """Spec edits bump `metadata.generation`; status and metadata churn does not."""
    return _generation(old) != _generation(new)


class EnqueueMapped:
    """An informer event handler that adds the mapped keys to a work queue."""

    def __init__(
        self,
        queue: WorkQueue[ObjectKey],
        to_keys: Mapper,
        update_predicate: UpdatePredicate | None = None,
    ) -> None:
        self._queue = queue
        self._to_keys = to_keys
        self._update_predicate = update_predicate

    def on_add(self, obj: KubeObject) -> None:
        self._enqueue(self._to_keys(obj))

    def on_update(self, old: KubeObject, new: KubeObject) -> None:
        if self._update_predicate is not None and not self._update_predicate(old, new):
            return
        self._enqueue({*self._to_keys(old), *self._to_keys(new)})

    def on_delete(self, obj: KubeObject) -> None:
        self._enqueue(self._to_keys(obj))

    def _enqueue(self, keys: Iterable[ObjectKey]) -> None:
        for key in keys:
            self._queue.add(key)


def _group(api_version: str) -> str:
    group, _, _ = api_version.rpartition("/")
    return group


def _generation(obj: Mapping[str, Any]) -> object:
    return (obj.get("metadata") or {}).get("generation")
