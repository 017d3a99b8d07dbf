"""Create-once objects (§1.7): the cache PVC, prewarm Job and demand Secret are never updated.

Their specs are immutable (PVC, Job) or must not be rotated (Secret), so the operator creates
them once and afterwards only checks that the live object is its own and, where a hash is
carried, that the requested spec has not changed. A changed request fails loudly instead of
silently serving from a cache built for another model or size.
"""

from __future__ import annotations

import hashlib
import json

from noctaya.core.errors import NoctayaError

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


def check_existing(
    *,
    reason: str,
    namespace: str,
    name: str,
    service: str,
    controlled: bool,
    desired_hash: str | None,
    live_hash: str | None,
) -> None:
    """Accept an object that already exists, or raise why it cannot be reused.

    `reason` is the apply step's (`ApplyCachePVC`, `ApplyPrewarmJob`,
    `ApplyDemandAuthentication`); an object without a desired hash (the demand Secret) is
    reused as long as this service controls it.
    """
    if not controlled:
        raise not_controlled_error(reason, namespace, name, service)
    if desired_hash is not None and live_hash != desired_hash:
        raise drift_error(reason, namespace, name)
