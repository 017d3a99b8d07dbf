"""Create-once objects: the cache PVC, prewarm Job and demand Secret are never updated.

Their specs are immutable (PVC, Job) or must not be rotated (Secret), so the operator creates
them once and afterwards only checks that the live object is its own and, where a hash is
carried, that the requested spec has not changed. A changed request fails loudly instead of
silently serving from a cache built for another model or size.

The hash is only a shortcut: another implementation serving the same API (one a cluster switches
from) hashes its own encoding of the same spec. When the hashes differ, the live spec itself is
compared with the request, and an equivalent object is adopted rather than reported as drift.
For a PVC, equivalent means both ways: what the request asks for holds in the live spec, and
what the live spec holds beyond the request is only what the API server fills in. A prewarm
Job runs another program in each implementation, so only its contract terms are compared
(`noctaya.k8s.prewarm_identity`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from noctaya.core.errors import NoctayaError
from noctaya.core.values.quantity import Quantity

CREATE_ONCE_HASH_ANNOTATION = "serving.noctaya.io/create-once-hash"


def create_once_hash(spec: object) -> str:
    """Hex SHA-256 of the canonical JSON of a rendered object's `spec`.

    Canonical: sorted keys, no whitespace, UTF-8, so the same spec always hashes the same
    whatever order a renderer built its dicts in. `spec` must be plain JSON data.
    """
    text = json.dumps(
        spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def not_controlled_error(reason: str, namespace: str, name: str, service: str) -> NoctayaError:
    return NoctayaError(
        reason,
        f"resource {namespace}/{name} already exists and is not controlled by LLMService {service}",
    )


def drift_error(reason: str, namespace: str, name: str) -> NoctayaError:
    return NoctayaError(
        reason,
        f"immutable resource {namespace}/{name} differs from the requested cache configuration; "
        "delete it explicitly before reconciling the change",
    )


@dataclass(frozen=True)
class OneOf:
    """A field the API server fills in when a request leaves it out: with one of `values`, or
    with a value of its own choosing (a generated selector, the bound volume) when None."""

    values: frozenset[object] | None = None

    def admits(self, value: object) -> bool:
        return self.values is None or value in self.values


ServerDefaults: TypeAlias = "OneOf | Mapping[str, ServerDefaults]"
"""What the server adds to a spec, shaped like the spec: a mapping's fields or a `OneOf` leaf."""

ANY_VALUE = OneOf()
NO_SERVER_DEFAULTS = OneOf(frozenset())
"""Nothing is filled in: every field the live spec has beyond the request is a change."""


def pvc_server_defaults(default_storage_classes: Iterable[str]) -> ServerDefaults:
    """A PVC's fields the server fills in: the volume mode, the volume it binds to, and the
    cluster's default StorageClass (any class marked default) when no class is requested.

    A live class that is not a default one was requested by name: dropping it from the request
    is a changed StorageClass, not a server default.
    """
    return {
        "volumeMode": OneOf(frozenset({"Filesystem"})),
        "volumeName": ANY_VALUE,
        "storageClassName": OneOf(frozenset(default_storage_classes)),
    }


SameRequest: TypeAlias = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
"""Whether a live spec (first) is what the requested one (second) asks for."""


def same_request(
    live_spec: Mapping[str, Any],
    requested_spec: Mapping[str, Any],
    server_defaults: ServerDefaults,
) -> bool:
    """Whether a live create-once spec is what the request asks for: the same size,
    StorageClass and access, however it was encoded.

    Every requested field must hold in the live spec, and every field only the live spec has
    must be one `server_defaults` allows (a field the request dropped is a change). Empty values
    count as absent (clients leave them out of what they send), lists must match entry by
    entry (an access mode dropped from the request is a change), and storage sizes compare by
    amount (`1.5Gi` is `1536Mi`).
    """
    return _matches(
        _with_storage_amount(live_spec), _with_storage_amount(requested_spec), server_defaults
    )


def check_existing(
    *,
    reason: str,
    namespace: str,
    name: str,
    service: str,
    controlled: bool,
    desired_hash: str | None,
    live_hash: str | None,
    requested_spec: Mapping[str, Any] | None = None,
    live_spec: Mapping[str, Any] | None = None,
    server_defaults: Callable[[], ServerDefaults] = lambda: NO_SERVER_DEFAULTS,
    same: SameRequest | None = None,
) -> bool:
    """Accept an object that already exists, or raise why it cannot be reused.

    Returns whether the object is adopted: it carries another hash than ours but the same
    request (`same_request`), so the caller stamps our hash on it. `reason` is the apply step's
    (`ApplyCachePVC`, `ApplyPrewarmJob`, `ApplyDemandAuthentication`); an object without a
    desired hash (the demand Secret) is reused as long as this service controls it.
    `server_defaults` is asked only when the hashes differ (a PVC's reads the cluster's
    StorageClasses). `same` replaces the whole-spec comparison where only some fields are the
    contract's terms (a prewarm Job's source and cache).
    """
    if not controlled:
        raise not_controlled_error(reason, namespace, name, service)
    if desired_hash is None or live_hash == desired_hash:
        return False
    if requested_spec is None or live_spec is None:
        raise drift_error(reason, namespace, name)
    if same is None:
        equivalent = same_request(live_spec, requested_spec, server_defaults())
    else:
        equivalent = same(live_spec, requested_spec)
    if not equivalent:
        raise drift_error(reason, namespace, name)
    return True


def _matches(live: object, wanted: object, defaults: ServerDefaults | None) -> bool:
    if _is_zero(wanted):
        return _is_zero(live) or _server_filled(live, defaults)
    if isinstance(wanted, Mapping):
        if not isinstance(live, Mapping):
            return False
        inner = defaults if isinstance(defaults, Mapping) else {}
        return all(
            _matches(live.get(key), wanted.get(key), inner.get(key)) for key in {*live, *wanted}
        )
    if isinstance(wanted, list):
        return (
            isinstance(live, list)
            and len(live) == len(wanted)
            and all(_matches(have, want, None) for have, want in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)


def _server_filled(live: object, defaults: ServerDefaults | None) -> bool:
    """Whether `live`, which the request leaves out, is what the server fills in."""
    if isinstance(defaults, OneOf):
        return defaults.admits(live)
    if isinstance(defaults, Mapping) and isinstance(live, Mapping):
        return all(_matches(value, None, defaults.get(key)) for key, value in live.items())
    return False


def _is_zero(value: object) -> bool:
    """Empty values, which clients leave out of what they send (`omitempty`). Not `false` or
    0: a field set to those may default to something else when absent."""
    return value is None or value in ("", {}, [])


def _with_storage_amount(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec with its storage request as a `Quantity`, which compares by amount."""
    requests = (spec.get("resources") or {}).get("requests") or {}
    storage = requests.get("storage")
    if not isinstance(storage, str):
        return spec
    try:
        amount = Quantity.parse(storage)
    except ValueError:
        return spec  # compared as written: a size that is not a quantity equals only itself
    resources = {**spec["resources"], "requests": {**requests, "storage": amount}}
    return {**spec, "resources": resources}
