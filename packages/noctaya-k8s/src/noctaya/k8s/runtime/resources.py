"""Which API resource serves a kind, found through the `kubernetes` DynamicClient's discovery.

The DynamicClient is built on first use rather than up front because its constructor already
talks to the API server, and an operator must start (and keep retrying) while the server is
unreachable. Discovery mutates shared caches, including a file in the temp directory, so every
lookup in the process goes through one lock. A miss makes the DynamicClient rediscover every
API group, so a kind found missing is reported missing without asking again for a while: a
cluster without KEDA would otherwise pay a full discovery on every reconcile.

Every lookup has a deadline covering both the wait for the lock and the discovery requests
(each gets what is left as its timeout): a stalled API server must not hold the lock, and every
thread queued behind it, for as long as the TCP connection lives. A client configured with
urllib3 retries repeats a timed-out request with the same timeout; callers that need the
deadline exact (leader election) resolve through a client without retries.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from noctaya.core.ports import Clock

_DISCOVERY_LOCK = threading.Lock()
NOT_SERVED_TTL = 10.0
# Seconds one discovery may take: kubectl's bound, so a server kubectl can discover, this can.
DISCOVERY_TIMEOUT = 32.0
# The deadline of the discovery running on this thread; None outside the resolver's lock.
_DISCOVERY_DEADLINE: ContextVar[float | None] = ContextVar("discovery_deadline", default=None)


class KindNotServed(Exception):
    """The API server does not serve this kind (yet): its CRD is missing or not established."""


class DeadlineExceeded(TimeoutError):
    """An API call (or the discovery before it) ran out of its time budget."""


def remaining(deadline: float, what: str, clock: Clock = time.monotonic) -> float:
    """Seconds left until `deadline` on `clock`; raises DeadlineExceeded once none are left."""
    left = deadline - clock()
    if left <= 0:
        raise DeadlineExceeded(f"no time left for {what}")
    return left


class _DeadlineDynamicClient(DynamicClient):
    """A DynamicClient whose own discovery requests time out at the resolver's deadline.

    Other threads' requests through the same client are untouched: the deadline is per thread.
    """

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        deadline = _DISCOVERY_DEADLINE.get()
        if deadline is not None and "_request_timeout" not in params:
            params["_request_timeout"] = remaining(deadline, f"discovery ({method} {path})")
        return super().request(method, path, body, **params)


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
        clock: Clock = time.monotonic,
    ) -> None:
        self._api_client = api_client
        self._dynamic: DynamicClient | None = None
        self._not_served_ttl = not_served_ttl
        self._clock = clock
        self._not_served_until: dict[ResourceKind, float] = {}

    @property
    def api_client(self) -> ApiClient:
        return self._api_client

    def dynamic_client(self, timeout: float = DISCOVERY_TIMEOUT) -> DynamicClient:
        """The DynamicClient (built now if needed: raises while the server is unreachable)."""
        with self._discovering(time.monotonic() + timeout, "the API client"):
            return self._dynamic_locked()

    def resolve(self, kind: ResourceKind, timeout: float = DISCOVERY_TIMEOUT) -> Any:
        """The DynamicClient `Resource` for `kind`; raises KindNotServed if the server lacks it.

        After a miss, the same kind is reported missing for `not_served_ttl` seconds unasked.
        Raises DeadlineExceeded (or the transport's timeout) when `timeout` seconds do not
        suffice for the lock and the discovery requests together.
        """
        missing = f"the API server does not serve {kind}"
        with self._discovering(time.monotonic() + timeout, f"discovery of {kind}"):
            if self._clock() < self._not_served_until.get(kind, 0.0):
                raise KindNotServed(missing)
            dynamic = self._dynamic_locked()
            try:
                return dynamic.resources.get(api_version=kind.api_version, kind=kind.kind)
            except ResourceNotFoundError as error:
                self._not_served_until[kind] = self._clock() + self._not_served_ttl
                raise KindNotServed(missing) from error

    @contextmanager
    def _discovering(self, deadline: float, what: str) -> Iterator[None]:
        """Hold the discovery lock, with `deadline` on this thread's discovery requests."""
        if not _DISCOVERY_LOCK.acquire(timeout=remaining(deadline, what)):
            raise DeadlineExceeded(f"{what}: another discovery held the lock until the deadline")
        token = _DISCOVERY_DEADLINE.set(deadline)
        try:
            yield
        finally:
            _DISCOVERY_DEADLINE.reset(token)
            _DISCOVERY_LOCK.release()

    def _dynamic_locked(self) -> DynamicClient:
        if self._dynamic is None:
            self._dynamic = _DeadlineDynamicClient(self._api_client)  # type: ignore[no-untyped-call]
        return self._dynamic


def client_without_retries(api_client: ApiClient) -> ApiClient:
    """A client like `api_client`, on connections of its own, that never retries a request.

    urllib3 retries a timed-out request with the whole timeout again, which stretches any
    deadline given as `_request_timeout`; callers with a deadline retry on their own terms.
    """
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    return ApiClient(configuration)


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
