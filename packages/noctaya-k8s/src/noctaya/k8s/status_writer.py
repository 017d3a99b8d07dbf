"""Writing LLMService status: only when it changed, through the status subresource, retrying
conflicts (5 attempts, 10 ms apart, as the reference behaviour specifies).

The first attempt writes on the object the reconcile read (the informer's copy): its
resourceVersion makes the API server refuse the write if anything changed since, so a
concurrent spec or metadata change is never overwritten, and the common case costs one request
instead of a read and a write. Only after a conflict is the newest object read and the status
computed again on it. An equal status is not written at all (no churn).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from kubernetes.dynamic.exceptions import ConflictError, NotFoundError
from noctaya.core.api import InvalidResource, LLMServiceStatus, read_llmservice_status
from noctaya.core.status import same_status
from noctaya.k8s.kinds import LLMSERVICE
from noctaya.k8s.runtime.resources import ResourceResolver

ATTEMPTS = 5
_DELAY = 0.010
_JITTER = 0.1

KubeObject = dict[str, Any]
DesiredStatus = Callable[[LLMServiceStatus], LLMServiceStatus]
_log = logging.getLogger(__name__)


def live_status(obj: KubeObject) -> LLMServiceStatus:
    """The stored status, fields of a newer CRD ignored; one this version cannot read is replaced.

    The status is the operator's own output, so an unreadable one (written by another version)
    must never stop the operator from reporting why the service fails.
    """
    try:
        return read_llmservice_status(obj.get("status") or {})
    except InvalidResource as error:
        _log.warning("replacing a status this version cannot read: %s", error.message)
        return LLMServiceStatus()


class StatusWriter:
    def __init__(self, resolver: ResourceResolver) -> None:
        self._resolver = resolver

    def write(
        self, seen: KubeObject, desired: DesiredStatus
    ) -> tuple[LLMServiceStatus, LLMServiceStatus, KubeObject] | None:
        """Compute `desired(previous)` on `seen` and store it if it differs, written on `seen`'s
        resourceVersion; after a conflict, computed again on the newest object and retried.

        `seen` is the object the reconcile read; when its status already equals the desired
        one nothing is sent at all. Returns (previous, written, object) after a write, or None
        when nothing was written (unchanged, or the service is gone).
        """
        previous = live_status(seen)
        status = desired(previous)
        if same_status(previous, status):
            return None
        namespace, name = seen["metadata"]["namespace"], seen["metadata"]["name"]
        client = self._resolver.dynamic_client()
        resource = self._resolver.resolve(LLMSERVICE)
        target: KubeObject = seen
        for attempt in range(ATTEMPTS):
            try:
                written = client.replace(  # type: ignore[no-untyped-call]
                    resource.subresources["status"],
                    body={**target, "status": status.to_wire()},
                    namespace=namespace,
                )
            except ConflictError:
                if attempt == ATTEMPTS - 1:
                    raise
                time.sleep(_DELAY * (1 + random.random() * _JITTER))
                try:
                    target = client.get(resource, name=name, namespace=namespace).to_dict()  # type: ignore[no-untyped-call]
                except NotFoundError:
                    return None
                previous = live_status(target)
                status = desired(previous)
                if same_status(previous, status):
                    return None
                continue
            except NotFoundError:
                return None
            return previous, status, dict(written.to_dict())
        return None
