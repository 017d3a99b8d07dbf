"""The informer's local copy of one resource kind, readable from any thread.

Objects are the API server's JSON as plain dicts. They are shared, not copied, between the
cache, the event handlers and the readers: treat them as read-only and copy before changing.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

KubeObject = dict[str, Any]
ObjectKey = tuple[str, str]
"""`(namespace, name)`; the namespace is `""` for cluster-scoped objects."""


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


@dataclass
class StoreDiff:
    """What changed between the cache and a fresh list of the server's objects."""

    added: list[KubeObject] = field(default_factory=list)
    updated: list[tuple[KubeObject, KubeObject]] = field(default_factory=list)  # (old, new)
    deleted: list[KubeObject] = field(default_factory=list)


class Store:
    """Objects of one watch by `(namespace, name)`."""

    def __init__(self) -> None:
        self._objects: dict[ObjectKey, KubeObject] = {}
        self._lock = threading.Lock()

    def get(self, key: ObjectKey) -> KubeObject | None:
        with self._lock:
            return self._objects.get(key)

    def list(self, namespace: str | None = None) -> list[KubeObject]:
        """Every cached object, or those of one namespace."""
        with self._lock:
            if namespace is None:
                return list(self._objects.values())
            return [obj for (ns, _), obj in self._objects.items() if ns == namespace]

    def keys(self) -> builtins.list[ObjectKey]:
        with self._lock:
            return list(self._objects)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def put(self, obj: KubeObject) -> KubeObject | None:
        """Store `obj`; return the object it replaced."""
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            self._objects[key] = obj
        return old

    def pop(self, key: ObjectKey) -> KubeObject | None:
        with self._lock:
            return self._objects.pop(key, None)

    def replace(self, objects: Iterable[KubeObject]) -> StoreDiff:
        """Make the cache equal to `objects` and say what that changed.

        Objects whose resourceVersion is unchanged are not reported: nothing happened to them.
        """
        fresh = {object_key(obj): obj for obj in objects}
        with self._lock:
            previous, self._objects = self._objects, fresh
        diff = StoreDiff()
        for key, obj in fresh.items():
            old = previous.get(key)
            if old is None:
                diff.added.append(obj)
            elif resource_version(old) != resource_version(obj):
                diff.updated.append((old, obj))
        diff.deleted = [obj for key, obj in previous.items() if key not in fresh]
        return diff
