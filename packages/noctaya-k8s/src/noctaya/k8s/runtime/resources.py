"""Which API resource serves a kind, found through the `kubernetes` DynamicClient's discovery.

The DynamicClient is built on first use rather than up front because its constructor already
talks to the API server, and an operator must start (and keep retrying) while the server is
unreachable. Discovery mutates shared caches, including a file in the temp directory, so every
lookup in the process goes through one lock. A miss makes the DynamicClient rediscover every
API group, so a kind found missing is reported missing without asking again for a while: a
cluster without KEDA would otherwise pay a full discovery on every reconcile.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

_DISCOVERY_LOCK = threading.Lock()
NOT_SERVED_TTL = 10.0


class KindNotServed(Exception):
    """The API server does not serve this kind (yet): its CRD is missing or not established."""


@dataclass(frozen=True)
class ResourceKind:
    """An API kind by its `apiVersion` (`v1`, `apps/v1`, `keda.sh/v1alpha1`) and `kind`."""

    api_version: str
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.api_version}"


class ResourceResolver:
    """Discovery for many informers sharing one DynamicClient."""

    def __init__(
        self,
        api_client: ApiClient,
        not_served_ttl: float = NOT_SERVED_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api_client = api_client
        self._dynamic: DynamicClient | None = None
        self._not_served_ttl = not_served_ttl
        self._clock = clock
        self._not_served_until: dict[ResourceKind, float] = {}

    @property
    def api_client(self) -> ApiClient:
        return self._api_client

    def dynamic_client(self) -> DynamicClient:
        """The DynamicClient (built now if needed: raises while the server is unreachable)."""
        with _DISCOVERY_LOCK:
            return self._dynamic_locked()

    def resolve(self, kind: ResourceKind) -> Any:
        """The DynamicClient `Resource` for `kind`; raises KindNotServed if the server lacks it.

        After a miss, the same kind is reported missing for `not_served_ttl` seconds unasked.
        """
        missing = f"the API server does not serve {kind}"
        with _DISCOVERY_LOCK:
            if self._clock() < self._not_served_until.get(kind, 0.0):
                raise KindNotServed(missing)
            dynamic = self._dynamic_locked()
            try:
                return dynamic.resources.get(api_version=kind.api_version, kind=kind.kind)
            except ResourceNotFoundError as error:
                self._not_served_until[kind] = self._clock() + self._not_served_ttl
                raise KindNotServed(missing) from error

    def _dynamic_locked(self) -> DynamicClient:
        if self._dynamic is None:
            self._dynamic = DynamicClient(self._api_client)  # type: ignore[no-untyped-call]
        return self._dynamic


def api_status(error: BaseException) -> int | None:
    """The HTTP status of an API error; None for transport errors (refused, reset, timeout)."""
    return error.status if isinstance(error, ApiException) else None


def describe_error(error: BaseException) -> str:
    """One line for a log: the HTTP status and reason, or the transport error."""
    status = api_status(error)
    if status is not None:
        return f"HTTP {status} {getattr(error, 'reason', '') or ''}".strip()
    return f"{type(error).__name__}: {error}"


def read_json(response: Any) -> dict[str, Any]:
    """The JSON object of a raw (`serialize=False`) DynamicClient response; frees the connection."""
    try:
        document = json.loads(response.data)
    finally:
        response.release_conn()
    if not isinstance(document, dict):
        raise ValueError(
            f"expected a JSON object from the API server, got {type(document).__name__}"
        )
    return document
