"""Writing rendered objects: server-side apply, create-once, and owned-object cleanup.

Every object gets a controller owner reference to its LLMService here, in one place, so
garbage collection removes the whole stack when the service is deleted (no finalizers).
"""

from __future__ import annotations

from typing import Any

from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
from noctaya.core.create_once import CREATE_ONCE_HASH_ANNOTATION, check_existing, create_once_hash
from noctaya.core.errors import NoctayaError
from noctaya.k8s.kinds import kind_of
from noctaya.k8s.runtime.resources import ResourceKind, ResourceResolver

FIELD_MANAGER = "noctaya-operator"
KubeObject = dict[str, Any]


def owner_reference(service: KubeObject) -> KubeObject:
    meta = service["metadata"]
    return {
        "apiVersion": service["apiVersion"],
        "kind": service["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: KubeObject, owner_uid: str) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("uid") == owner_uid for ref in refs)


def with_create_once_hash(obj: KubeObject) -> KubeObject:
    """Stamp the immutable-spec hash (of the Job spec, or the PVC spec) on a create-once object."""
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[CREATE_ONCE_HASH_ANNOTATION] = create_once_hash(obj["spec"])
    return obj


class Applier:
    """The only writer of owned objects; talks to the API server through the DynamicClient."""

    def __init__(self, resolver: ResourceResolver) -> None:
        self._resolver = resolver

    def _api(self, kind: ResourceKind) -> tuple[Any, Any]:
        return self._resolver.dynamic_client(), self._resolver.resolve(kind)

    def get(self, kind: ResourceKind, namespace: str, name: str) -> KubeObject | None:
        client, resource = self._api(kind)
        try:
            return dict(client.get(resource, name=name, namespace=namespace).to_dict())
        except NotFoundError:
            return None

    def list(self, kind: ResourceKind, namespace: str, label_selector: str) -> list[KubeObject]:
        client, resource = self._api(kind)
        items = client.get(resource, namespace=namespace, label_selector=label_selector).items
        return [dict(item.to_dict()) for item in items]

    def apply(self, obj: KubeObject, owner: KubeObject) -> KubeObject:
        """Server-side apply with forced ownership: fields Noctaya sets never drift."""
        obj["metadata"]["ownerReferences"] = [owner_reference(owner)]
        client, resource = self._api(kind_of(obj))
        applied = client.server_side_apply(
            resource,
            body=obj,
            namespace=obj["metadata"]["namespace"],
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )
        return dict(applied.to_dict())

    def create_once(self, obj: KubeObject, owner: KubeObject, reason: str) -> KubeObject:
        """Create, or accept an existing object only if this service controls it unchanged."""
        meta = obj["metadata"]
        meta["ownerReferences"] = [owner_reference(owner)]
        client, resource = self._api(kind_of(obj))
        try:
            return dict(client.create(resource, body=obj, namespace=meta["namespace"]).to_dict())
        except ConflictError:
            pass
        live = self.get(kind_of(obj), meta["namespace"], meta["name"])
        if live is None:  # deleted between create and get: the retry creates it
            raise NoctayaError(reason, f"resource {meta['namespace']}/{meta['name']} vanished")
        check_existing(
            reason=reason,
            namespace=meta["namespace"],
            name=meta["name"],
            service=owner["metadata"]["name"],
            controlled=controlled_by(live, owner["metadata"]["uid"]),
            desired_hash=(meta.get("annotations") or {}).get(CREATE_ONCE_HASH_ANNOTATION),
            live_hash=(live["metadata"].get("annotations") or {}).get(CREATE_ONCE_HASH_ANNOTATION),
        )
        return live

    def delete_if_controlled(
        self, kind: ResourceKind, namespace: str, name: str, owner_uid: str
    ) -> bool:
        """Delete an object this service controls; leave anybody else's alone, silently."""
        live = self.get(kind, namespace, name)
        if live is None or not controlled_by(live, owner_uid):
            return False
        client, resource = self._api(kind)
        try:
            client.delete(
                resource,
                name=name,
                namespace=namespace,
                body={"preconditions": {"uid": live["metadata"]["uid"]}},
            )
        except NotFoundError:
            return False
        return True
