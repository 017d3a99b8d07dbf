"""Lease-based leader election (coordination.k8s.io/v1).

The Lease is read and written by client-go's leaderelection rules, on purpose: its record means
the same to this operator, to a Go one and to `kubectl describe lease`.

Not `kubernetes.leaderelection`: its loops sleep without a way to cancel them, it cannot
release the lease on shutdown, it exits the process on bad timings, insists on whole-second
periods (too slow for tests) and talks through the global default client.

Rules: a candidate takes the Lease when it does not exist, has no holder
(released), or its record has not changed for `leaseDurationSeconds` as measured on the
candidate's own clock since it last saw the record change (so clock skew between replicas does
not matter). The leader renews every `retry_period`; when no renewal succeeded for
`renew_deadline` it gives up, which is shorter than the lease duration so that it stops before
anyone else may start. Writes carry the resourceVersion that was read, so two candidates never
both win.

The renew deadline is a hard bound, not a check made after a call returns: every attempt runs
against one deadline, each request gets what is left of it as its socket timeout, and the
elector talks over a connection of its own without transport retries (a retried timeout would
restart its clock). The Lease resource is discovered once; renewals never touch discovery.
"""

from __future__ import annotations

import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from noctaya.core.ports import Clock

from .resources import (
    ResourceKind,
    ResourceResolver,
    api_status,
    client_without_retries,
    describe_error,
    read_json,
    remaining,
)

log = logging.getLogger(__name__)

LEADER_ELECTION_ID = "6d7012cb.noctaya.io"
LEASE_KIND = ResourceKind("coordination.k8s.io/v1", "Lease")
JITTER_FACTOR = 1.2
HTTP_NOT_FOUND = 404


def default_identity() -> str:
    """`<hostname>_<uuid>`: the pod that campaigns, unique across its restarts."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease lives and the timings (by default a 15 s lease, given up 10 s after the
    last renewal, renewed every 2 s)."""

    namespace: str
    name: str = LEADER_ELECTION_ID
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("leader election needs a namespace for its Lease")
        if not self.identity:
            raise ValueError("leader election identity must not be empty")
        if self.retry_period <= 0:
            raise ValueError("leader election retry_period must be positive")
        if self.lease_duration < 1:
            raise ValueError("leader election lease_duration must be at least 1s")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leader election lease_duration must exceed renew_deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"leader election renew_deadline must exceed {JITTER_FACTOR} * retry_period"
            )

    @property
    def lease_duration_seconds(self) -> int:
        """The Lease field is whole seconds; rounding up never shortens the promise."""
        return math.ceil(self.lease_duration)


class LeaderElector:
    """Campaigns for one Lease; `run` blocks, `release` hands the Lease over after `run` ends."""

    def __init__(
        self,
        api_client: ApiClient,
        config: LeaderElectionConfig,
        on_started_leading: Callable[[], None] = lambda: None,
        on_lost_leadership: Callable[[], None] = lambda: None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.config = config
        # Own connections: renewals never queue behind watches in the shared pool.
        self._resolver = ResourceResolver(client_without_retries(api_client))
        self._lease_kind: Any = None  # the Lease's DynamicClient resource, once discovered
        self._on_started_leading = on_started_leading
        self._on_lost_leadership = on_lost_leadership
        self._clock = clock
        self._leading = threading.Event()
        self._observed_version = ""
        self._observed_at = 0.0
        self._observed_duration = 0

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def run(self, stop: threading.Event) -> None:
        """Acquire the Lease, then renew it until `stop` is set or a renewal deadline passes."""
        if not self._acquire(stop):
            return
        self._leading.set()
        log.info("%s acquired lease %s/%s", self.identity, self.config.namespace, self.config.name)
        self._on_started_leading()
        renewed = self._clock()
        while True:
            deadline = renewed + self.config.renew_deadline
            pause = min(self.config.retry_period, deadline - self._clock())
            if stop.wait(max(pause, 0.0)):
                return
            attempted = self._clock()  # the record written now counts from here, not later
            if self._try_acquire_or_renew(deadline):
                renewed = attempted
            elif self._clock() >= deadline:
                self._leading.clear()
                log.error(
                    "%s lost lease %s/%s: not renewed within %.1fs",
                    self.identity,
                    self.config.namespace,
                    self.config.name,
                    self.config.renew_deadline,
                )
                self._on_lost_leadership()
                return

    def release(self) -> bool:
        """Give the Lease up so a standby takes over now instead of after it expires.

        Call after `run` returned and the protected work stopped. Does nothing unless this
        candidate still leads and `release_on_cancel` is set.
        """
        if not self._leading.is_set() or not self.config.release_on_cancel:
            return False
        self._leading.clear()
        deadline = self._clock() + self.config.renew_deadline
        try:
            lease = self._read(deadline)
            if lease is None or _spec(lease).get("holderIdentity") != self.identity:
                return False
            now = _micro_time()
            spec = {
                **_spec(lease),
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            self._lease_resource(deadline).replace(
                body={**lease, "spec": spec},
                namespace=self.config.namespace,
                serialize=False,
                _request_timeout=self._remaining(deadline, "releasing the lease"),
            )
        except Exception as error:
            log.warning("%s could not release its lease: %s", self.identity, describe_error(error))
            return False
        log.info("%s released lease %s/%s", self.identity, self.config.namespace, self.config.name)
        return True

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self._try_acquire_or_renew(self._clock() + self.config.renew_deadline):
                return True
            stop.wait(self.config.retry_period * random.uniform(1.0, JITTER_FACTOR))
        return False

    def _try_acquire_or_renew(self, deadline: float) -> bool:
        try:
            return self._acquire_or_renew_once(deadline)
        except Exception as error:
            log.info("%s could not update its lease: %s", self.identity, describe_error(error))
            return False

    def _acquire_or_renew_once(self, deadline: float) -> bool:
        """One read and one write, both within `deadline` (on the elector's clock)."""
        now = _micro_time()
        lease = self._read(deadline)
        resource = self._lease_resource(deadline)
        if lease is None:
            body = {
                "apiVersion": LEASE_KIND.api_version,
                "kind": LEASE_KIND.kind,
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": self._spec(acquire_time=now, renew_time=now, transitions=0),
            }
            created = resource.create(
                body=body,
                namespace=self.config.namespace,
                serialize=False,
                _request_timeout=self._remaining(deadline, "creating the lease"),
            )
            self._observe(read_json(created))
            return True
        self._observe(lease)
        spec = _spec(lease)
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.identity and self._observed_still_valid():
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            new_spec = self._spec(spec.get("acquireTime") or now, now, transitions)
        else:
            new_spec = self._spec(now, now, transitions + 1)
        replaced = resource.replace(
            body={**lease, "spec": new_spec},
            namespace=self.config.namespace,
            serialize=False,
            _request_timeout=self._remaining(deadline, "updating the lease"),
        )
        self._observe(read_json(replaced))
        return True

    def _spec(self, acquire_time: str, renew_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.config.lease_duration_seconds,
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: dict[str, Any]) -> None:
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if version != self._observed_version:
            self._observed_version = version
            self._observed_at = self._clock()
            self._observed_duration = int(_spec(lease).get("leaseDurationSeconds") or 0)

    def _observed_still_valid(self) -> bool:
        return self._observed_at + self._observed_duration > self._clock()

    def _read(self, deadline: float) -> dict[str, Any] | None:
        try:
            response = self._lease_resource(deadline).get(
                name=self.config.name,
                namespace=self.config.namespace,
                serialize=False,
                _request_timeout=self._remaining(deadline, "reading the lease"),
            )
        except ApiException as error:
            if api_status(error) == HTTP_NOT_FOUND:
                return None
            raise
        return read_json(response)

    def _lease_resource(self, deadline: float) -> Any:
        if self._lease_kind is None:
            timeout = self._remaining(deadline, "discovering the Lease resource")
            self._lease_kind = self._resolver.resolve(LEASE_KIND, timeout=timeout)
        return self._lease_kind

    def _remaining(self, deadline: float, what: str) -> float:
        return remaining(deadline, what, self._clock)


def _spec(lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def _micro_time() -> str:
    """Kubernetes MicroTime: RFC 3339 with exactly six fractional digits."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
