"""The `LeaderElection` event on the Lease (`<identity> became leader`).

It is the event client-go's resource lock records, on purpose: `kubectl describe lease
6d7012cb.noctaya.io` then shows which replica took over and when, which is the first question
after a fail-over. Best effort: a lost event never stops the operator.
Written through the DynamicClient the controller already uses: the typed `CoreV1Api` would be
imported on first use, which takes seconds on a busy machine while the workers run.
"""

from __future__ import annotations

import logging
import secrets
import threading
from datetime import UTC, datetime

from noctaya.k8s.runtime import LeaderElectionConfig, Manager, ResourceKind, ResourceResolver
from noctaya.k8s.runtime.leader_election import LEASE_KIND
from noctaya.k8s.runtime.resources import describe_error

log = logging.getLogger(__name__)

CORE_EVENT = ResourceKind("v1", "Event")
COMPONENT = "noctaya-operator"
REASON = "LeaderElection"


def record_became_leader(resolver: ResourceResolver, config: LeaderElectionConfig) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "apiVersion": CORE_EVENT.api_version,
        "kind": CORE_EVENT.kind,
        "metadata": {
            "name": f"{config.name}.{secrets.token_hex(8)}",
            "namespace": config.namespace,
        },
        "involvedObject": {
            "apiVersion": LEASE_KIND.api_version,
            "kind": LEASE_KIND.kind,
            "name": config.name,
            "namespace": config.namespace,
        },
        "reason": REASON,
        "message": f"{config.identity} became leader",
        "type": "Normal",
        "source": {"component": COMPONENT},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        events = resolver.resolve(CORE_EVENT)
        resolver.dynamic_client().create(events, body=event, namespace=config.namespace)  # type: ignore[no-untyped-call]
    except Exception as error:
        log.warning("could not record the leader election event: %s", describe_error(error))


def announce_leadership(
    manager: Manager, resolver: ResourceResolver, config: LeaderElectionConfig
) -> threading.Thread:
    """Record the event once this replica leads and starts reconciling (a daemon thread)."""

    def wait_then_record() -> None:
        manager.reconciling.wait()
        if manager.is_leader:
            record_became_leader(resolver, config)

    thread = threading.Thread(target=wait_then_record, name="leader event", daemon=True)
    thread.start()
    return thread
