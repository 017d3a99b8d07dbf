"""Writing rendered objects: server-side apply, create-once, and owned-object cleanup.

Every object gets a controller owner reference to its LLMService here, in one place, so
garbage collection removes the whole stack when the service is deleted (no finalizers).

Nothing is written that would not change anything: an applied object carries the hash of what
was applied, and is applied again only when that request changes or someone edited a field
Noctaya sets. A hash alone would miss hand edits; a field comparison alone would miss fields
the request dropped (server-side apply removes them, a comparison cannot see them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
from noctaya.core.errors import NoctayaError
from noctaya.k8s import kinds
from noctaya.k8s.create_once import (
    CREATE_ONCE_HASH_ANNOTATION,
    NO_SERVER_DEFAULTS,
    ServerDefaults,
    check_existing,
    create_once_hash,
    not_controlled_error,
    pvc_server_defaults,
)
from noctaya.k8s.kinds import kind_of
from noctaya.k8s.prewarm_identity import same_prewarm
from noctaya.k8s.reader import ApiReader, KubeObject, Reader
from noctaya.k8s.runtime.resources import ResourceKind, ResourceResolver, read_json

FIELD_MANAGER = "noctaya-operator"
APPLIED_HASH_ANNOTATION = "serving.noctaya.io/applied-hash"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
"""Either marks a StorageClass as the one a claim without a class gets."""


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


_LIST_KEYS = ("name", "uid")
"""Fields that identify an entry of a list of objects (containers, env, volumes, ports, owners)."""


def contains(live: Any, wanted: Any) -> bool:
    """Whether `live` holds every field of `wanted`.

    The server adds defaults and status beside the applied fields; those do not count, nor do
    list entries others added (a webhook's env var, another owner reference): entries with a
    name (or uid) are matched by it, other lists must match element by element.
    """
    if isinstance(wanted, dict):
        return isinstance(live, dict) and all(
            key in live and contains(live[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        if not isinstance(live, list):
            return False
        key = _list_key(wanted)
        if key is None:
            return len(live) == len(wanted) and all(
                contains(have, want) for have, want in zip(live, wanted, strict=True)
            )
        by_key = {entry.get(key): entry for entry in live if isinstance(entry, dict)}
        return all(contains(by_key.get(entry[key]), entry) for entry in wanted)
    return bool(live == wanted)


def _list_key(entries: list[Any]) -> str | None:
    for key in _LIST_KEYS:
        if entries and all(isinstance(e, dict) and key in e for e in entries):
            return key
    return None


def _check_controller(live: KubeObject, owner: KubeObject, reason: str) -> None:
    refs = (live.get("metadata") or {}).get("ownerReferences") or []
    controllers = [ref for ref in refs if ref.get("controller")]
    if controllers and not controlled_by(live, owner["metadata"]["uid"]):
        meta = live["metadata"]
        raise not_controlled_error(
            reason, meta["namespace"], meta["name"], owner["metadata"]["name"]
        )


def _annotation(obj: KubeObject, key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(key)


class Applier:
    """The only writer of owned objects; reads current state through a `Reader`."""

    def __init__(self, resolver: ResourceResolver, reader: Reader | None = None) -> None:
        self._resolver = resolver
        self._reader: Reader = reader or ApiReader(resolver)

    def _api(self, kind: ResourceKind) -> tuple[Any, Any]:
        return self._resolver.dynamic_client(), self._resolver.resolve(kind)

    def apply(self, obj: KubeObject, owner: KubeObject, reason: str) -> KubeObject:
        """Server-side apply with forced ownership: fields Noctaya sets never drift.

        An object another controller owns is never taken over: two services whose names
        collide (`x-scaler` the gateway of one, the scaler Service of `x`) would otherwise
        hand it back and forth forever.
        """
        meta = obj["metadata"]
        meta["ownerReferences"] = [owner_reference(owner)]
        digest = create_once_hash(obj)  # of the freshly rendered request, before the stamp
        meta.setdefault("annotations", {})[APPLIED_HASH_ANNOTATION] = digest
        live = self._reader.get(kind_of(obj), meta["namespace"], meta["name"])
        if live is not None:
            _check_controller(live, owner, reason)
            if contains(live, obj):
                return live
        client, resource = self._api(kind_of(obj))
        # The raw JSON: the client's ResourceInstance wrapping costs more than the request.
        applied = client.server_side_apply(
            resource,
            body=obj,
            namespace=obj["metadata"]["namespace"],
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
            serialize=False,
        )
        return read_json(applied)

    def create_once(self, obj: KubeObject, owner: KubeObject, reason: str) -> KubeObject:
        """Create, or accept an existing object only if this service controls it unchanged."""
        meta = obj["metadata"]
        meta["ownerReferences"] = [owner_reference(owner)]
        kind = kind_of(obj)
        live = self._reader.get(kind, meta["namespace"], meta["name"])
        if live is None:
            client, resource = self._api(kind)
            try:
                return read_json(
                    client.create(resource, body=obj, namespace=meta["namespace"], serialize=False)
                )
            except ConflictError:  # exists, but not (yet) in what we read: ask the server
                live = ApiReader(self._resolver).get(kind, meta["namespace"], meta["name"])
        if live is None:  # deleted between create and get: the retry creates it
            raise NoctayaError(reason, f"resource {meta['namespace']}/{meta['name']} vanished")
        desired_hash = _annotation(obj, CREATE_ONCE_HASH_ANNOTATION)
        adopt = check_existing(
            reason=reason,
            namespace=meta["namespace"],
            name=meta["name"],
            service=owner["metadata"]["name"],
            controlled=controlled_by(live, owner["metadata"]["uid"]),
            desired_hash=desired_hash,
            live_hash=_annotation(live, CREATE_ONCE_HASH_ANNOTATION),
            requested_spec=obj.get("spec"),
            live_spec=live.get("spec"),
            server_defaults=self._server_defaults(kind),
            # A Job's image, env and scheduling are not contract terms: its source and cache are.
            same=same_prewarm if kind == kinds.JOB else None,
        )
        if adopt and desired_hash is not None:
            return self._stamp_create_once_hash(kind, live, desired_hash)
        return live

    def _server_defaults(self, kind: ResourceKind) -> Callable[[], ServerDefaults]:
        """What the API server fills into a create-once spec of `kind`, looked up when asked."""
        if kind == kinds.PVC:
            return lambda: pvc_server_defaults(self._default_storage_classes())
        return lambda: NO_SERVER_DEFAULTS

    def _default_storage_classes(self) -> list[str]:
        """The StorageClasses marked default, read from the API server: only an object hashed
        by someone else asks, which is rare enough not to watch them."""
        return [
            found["metadata"]["name"]
            for found in ApiReader(self._resolver).list(kinds.STORAGE_CLASS, "", "")
            if any(_annotation(found, key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)
        ]

    def _stamp_create_once_hash(
        self, kind: ResourceKind, live: KubeObject, digest: str
    ) -> KubeObject:
        """Adopt an equivalent object hashed by another implementation: from now on our hash
        decides. The resourceVersion precondition makes the stamp apply only to the spec that
        was compared; a conflict is retried like any failed step.
        """
        meta = live["metadata"]
        client, resource = self._api(kind)
        patched = client.patch(
            resource,
            name=meta["name"],
            namespace=meta["namespace"],
            body={
                "metadata": {
                    "resourceVersion": meta["resourceVersion"],
                    "annotations": {CREATE_ONCE_HASH_ANNOTATION: digest},
                }
            },
            content_type="application/merge-patch+json",
        )
        return dict(patched.to_dict())

    def delete_if_controlled(
        self, kind: ResourceKind, namespace: str, name: str, owner_uid: str
    ) -> bool:
        """Delete an object this service controls; leave anybody else's alone, silently.

        Its dependents go in the background: a Job's pods, which the API server would otherwise
        orphan (batch/v1 keeps the old default). Only the object read is deleted, never one
        created since under the same name.
        """
        live = self._reader.get(kind, namespace, name)
        if live is None or not controlled_by(live, owner_uid):
            return False
        client, resource = self._api(kind)
        try:
            client.delete(
                resource,
                name=name,
                namespace=namespace,
                body={
                    "preconditions": {"uid": live["metadata"]["uid"]},
                    "propagationPolicy": "Background",
                },
            )
        except NotFoundError:
            return False
        return True
