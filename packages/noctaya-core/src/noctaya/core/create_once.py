"""Create-once objects: the cache PVC, prewarm Job and demand Secret are never updated.

Their specs are immutable (PVC, Job) or must not be rotated (Secret), so the operator creates
them once and afterwards only checks that the live object is its own and, where a hash is
carried, that the requested spec has not changed. A changed request fails loudly instead of
silently serving from a cache built for another model or size.

The hash is only a shortcut: another implementation serving the same API (one a cluster switches
from) hashes its own encoding of the same spec. When the hashes differ, the live spec itself is
compared with the request, and an equivalent object is adopted rather than reported as drift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

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


def same_request(live_spec: Mapping[str, Any], requested_spec: Mapping[str, Any]) -> bool:
    """Whether a live create-once spec is what the request asks for: the same size,
    StorageClass, access, source and prewarm specification, however it was encoded.

    Every requested field must hold in the live spec; fields only the live spec has are the API
    server's defaults (a Job's selector and pod defaults, a PVC's volume mode, the cluster's
    default StorageClass when none is requested) and do not count. Empty values count as absent
    (Go encoders omit them), lists must match entry by entry (an env var or container dropped
    from the request is a change), and storage sizes compare by amount (`1.5Gi` is `1536Mi`).
    """
    return _holds(_with_storage_amount(live_spec), _with_storage_amount(requested_spec))


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
) -> bool:
    """Accept an object that already exists, or raise why it cannot be reused.

    Returns whether the object is adopted: it carries another hash than ours but the same
    request (`same_request`), so the caller stamps our hash on it. `reason` is the apply step's
    (`ApplyCachePVC`, `ApplyPrewarmJob`, `ApplyDemandAuthentication`); an object without a
    desired hash (the demand Secret) is reused as long as this service controls it.
    """
    if not controlled:
        raise not_controlled_error(reason, namespace, name, service)
    if desired_hash is None or live_hash == desired_hash:
        return False
    if requested_spec is None or live_spec is None or not same_request(live_spec, requested_spec):
        raise drift_error(reason, namespace, name)
    return True


def _holds(live: object, wanted: object) -> bool:
    if _is_zero(wanted):
        return _is_zero(live)
    if isinstance(wanted, Mapping):
        return isinstance(live, Mapping) and all(
            _holds(live.get(key), value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(live, list)
            and len(live) == len(wanted)
            and all(_holds(have, want) for have, want in zip(live, wanted, strict=True))
        )
    return bool(live == wanted)


def _is_zero(value: object) -> bool:
    """Empty values Go encoders omit. Not `false` or 0: the fields where Noctaya sets those
    (`automountServiceAccountToken`) default to something else when absent."""
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
