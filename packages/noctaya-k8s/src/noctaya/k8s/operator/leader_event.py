"""The `LeaderElection` event on the Lease, as client-go's resource lock records it.

`kubectl describe lease 6d7012cb.noctaya.io` then shows which replica took over and when, which
is the first question after a fail-over. Best effort: a lost event never stops the operator.
"""

from __future__ import annotations

import logging
import secrets
import threading
from datetime import UTC, datetime

from kubernetes import client as k8s
from noctaya.k8s.runtime import LeaderElectionConfig, Manager
from noctaya.k8s.runtime.resources import describe_error

log = logging.getLogger(__name__)

COMPONENT = "noctaya-operator"
REASON = "LeaderElection"


def record_became_leader(api_client: k8s.ApiClient, config: LeaderElectionConfig) -> None:
    now = datetime.now(UTC)
    event = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(
            name=f"{config.name}.{secrets.token_hex(8)}", namespace=config.namespace
        ),
        involved_object=k8s.V1ObjectReference(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            name=config.name,
            namespace=config.namespace,
        ),
        reason=REASON,
        message=f"{config.identity} became leader",
        type="Normal",
        source=k8s.V1EventSource(component=COMPONENT),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    try:
        k8s.CoreV1Api(api_client).create_namespaced_event(config.namespace, event)
    except Exception as error:
        log.warning("could not record the leader election event: %s", describe_error(error))


def announce_leadership(
    manager: Manager, api_client: k8s.ApiClient, config: LeaderElectionConfig
) -> threading.Thread:
    """Record the event once this replica leads and starts reconciling (a daemon thread)."""

    def wait_then_record() -> None:
        manager.reconciling.wait()
        if manager.is_leader:
            record_became_leader(api_client, config)

    thread = threading.Thread(target=wait_then_record, name="leader event", daemon=True)
    thread.start()
    return thread
