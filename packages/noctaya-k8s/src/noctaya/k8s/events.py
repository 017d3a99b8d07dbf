"""events.k8s.io Events for status transitions, as the `llmservice-controller` reporter."""

from __future__ import annotations

import logging
import os
import secrets
from datetime import UTC, datetime
from typing import Any

from noctaya.core.status import StatusEvent
from noctaya.k8s.kinds import EVENT
from noctaya.k8s.runtime.resources import ResourceResolver

REPORTING_CONTROLLER = "llmservice-controller"
_log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, resolver: ResourceResolver, instance: str | None = None) -> None:
        self._resolver = resolver
        self._instance = instance or os.environ.get("HOSTNAME") or "noctaya-operator"

    def record(self, regarding: dict[str, Any], event: StatusEvent) -> None:
        """Best effort: a lost event must never fail the reconcile that already wrote status."""
        meta = regarding["metadata"]
        body = {
            "apiVersion": EVENT.api_version,
            "kind": EVENT.kind,
            "metadata": {
                "name": f"{meta['name']}.{secrets.token_hex(8)}",
                "namespace": meta["namespace"],
            },
            "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note[:1024],
            "regarding": {
                "apiVersion": regarding["apiVersion"],
                "kind": regarding["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
        }
        try:
            client = self._resolver.dynamic_client()
            client.create(self._resolver.resolve(EVENT), body=body, namespace=meta["namespace"])  # type: ignore[no-untyped-call]
        except Exception as error:
            _log.warning("could not record event %s: %s", event.reason, error)
