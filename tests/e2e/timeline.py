"""What one namespace did, as watches saw it: every change of its pods, Deployments, events and
LLMServices, with the moment this process learnt of it (`time.monotonic()`).

A fault test waits on it for the first sign of a fault in a pod's status and for the first
status the operator wrote about it, and the difference is how long the operator took; the
whole timeline is printed when a test fails. Objects are kept as the API server's JSON.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import watch
from urllib3.exceptions import HTTPError

Obj = dict[str, Any]
_RETRY_SECONDS = 0.5
_WATCH_SECONDS = 60
LLMSERVICES = ("serving.noctaya.io", "v1alpha1", "llmservices")
SCALED_OBJECTS = ("keda.sh", "v1alpha1", "scaledobjects")


@dataclass(frozen=True)
class Entry:
    at: float
    kind: str
    name: str
    summary: str
    obj: Obj


class _RawWatch(watch.Watch):
    """Objects stay the server's JSON (the typed models refuse some valid events)."""

    def get_return_type(self, func: Callable[..., Any]) -> None:
        return None


class Timeline:
    """Watches one namespace from `start` until `stop`; `wait` finds past or future entries."""

    def __init__(self, api_client: k8s_client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.started = time.monotonic()
        self._entries: list[Entry] = []
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        core = k8s_client.CoreV1Api(api_client)
        apps = k8s_client.AppsV1Api(api_client)
        custom = k8s_client.CustomObjectsApi(api_client)
        self._sources: dict[str, Callable[..., Any]] = {
            "Pod": lambda **kw: core.list_namespaced_pod(namespace, **kw),
            "Deployment": lambda **kw: apps.list_namespaced_deployment(namespace, **kw),
            "Event": lambda **kw: core.list_namespaced_event(namespace, **kw),
            "LLMService": lambda **kw: custom.list_namespaced_custom_object(
                *LLMSERVICES[:2], namespace, LLMSERVICES[2], **kw
            ),
            "ScaledObject": lambda **kw: custom.list_namespaced_custom_object(
                *SCALED_OBJECTS[:2], namespace, SCALED_OBJECTS[2], **kw
            ),
        }
        self._threads = [
            threading.Thread(target=self._follow, args=(kind,), daemon=True, name=f"watch {kind}")
            for kind in self._sources
        ]

    def __enter__(self) -> Timeline:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()

    def note(self, what: str) -> float:
        """Records something the test did, to read beside what the cluster did; returns when."""
        with self._changed:
            entry = Entry(time.monotonic(), "Test", "-", what, {})
            self._entries.append(entry)
            self._changed.notify_all()
        return entry.at

    def entries(self) -> list[Entry]:
        with self._changed:
            return list(self._entries)

    def first(self, predicate: Callable[[Entry], bool]) -> Entry | None:
        return next((entry for entry in self.entries() if predicate(entry)), None)

    def wait(self, what: str, predicate: Callable[[Entry], bool], timeout: float = 180.0) -> Entry:
        """The first entry (seen already or still to come) that `predicate` accepts."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for entry in self._entries[seen:]:
                    if predicate(entry):
                        return entry
                seen = len(self._entries)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
                self._changed.wait(min(left, 1.0))

    def render(self) -> str:
        lines = [f"---- timeline of {self.namespace} (seconds since it started)"]
        lines += [
            f"{entry.at - self.started:8.2f} {entry.kind}/{entry.name}: {entry.summary}"
            for entry in self.entries()
        ]
        return "\n".join(lines)

    @contextlib.contextmanager
    def printed_on_failure(self) -> Iterator[Timeline]:
        try:
            yield self
        except BaseException:
            print(self.render())
            raise

    def _follow(self, kind: str) -> None:
        """List, then watch from the list's version, and when a watch's window ends, on from
        the last version it saw (bookmarks keep that recent in a quiet namespace); after an
        error, again from a new list. A new list at each window's end would only show the
        latest state of what changed in between: a pod's `ErrImagePull` already turned
        `ImagePullBackOff` would never be seen."""
        list_objects = self._sources[kind]
        last: dict[str, str] = {}
        while not self._stopping.is_set():
            try:
                listed = list_objects(_preload_content=False, _request_timeout=30)
                page = _json(listed)
                for item in page.get("items") or []:
                    self._record(kind, item, last)
                version = page["metadata"]["resourceVersion"]
                while not self._stopping.is_set():
                    for event in _RawWatch().stream(
                        list_objects,
                        resource_version=version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=_WATCH_SECONDS,
                    ):
                        if self._stopping.is_set():
                            return
                        version = event["object"]["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._record(kind, event["object"], last)
            except (k8s_client.ApiException, HTTPError, OSError, ValueError, KeyError):
                self._stopping.wait(_RETRY_SECONDS)

    def _record(self, kind: str, obj: Obj, last: dict[str, str]) -> None:
        name = obj["metadata"]["name"]
        summary = _summaries[kind](obj)
        if last.get(name) == summary:
            return
        last[name] = summary
        with self._changed:
            self._entries.append(Entry(time.monotonic(), kind, name, summary, obj))
            self._changed.notify_all()


def _json(response: Any) -> Obj:
    return dict(json.loads(response.data))


def _pod(pod: Obj) -> str:
    status = pod.get("status") or {}
    parts = [str(status.get("phase"))]
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("reason"):
            parts.append(f"{condition['type']}=False/{condition['reason']}")
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        (now, detail), *_ = state.items() or [("?", {})]
        last = ((container.get("lastState") or {}).get("terminated") or {}).get("reason")
        parts.append(
            f"{container['name']} {now}"
            + (f"/{detail.get('reason')}" if detail.get("reason") else "")
            + f" restarts={container.get('restartCount', 0)}"
            + (f" last={last}" if last else "")
            + (" ready" if container.get("ready") else "")
        )
    return " ".join(parts)


def _deployment(deployment: Obj) -> str:
    status = deployment.get("status") or {}
    conditions = " ".join(
        f"{c['type']}={c['status']}/{c.get('reason', '')}" for c in status.get("conditions") or []
    )
    counts = (status.get(k, 0) for k in ("replicas", "readyReplicas", "availableReplicas"))
    return "replicas={}/{}/{} ".format(*counts) + conditions


def _event(event: Obj) -> str:
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component")
    regarding = (event.get("involvedObject") or {}).get("name")
    return (
        f"{event.get('type')} {event.get('reason')} on {regarding} by {source}: "
        f"{event.get('message') or event.get('note') or ''} (x{event.get('count') or 1})"
    )


def _service(obj: Obj) -> str:
    """An LLMService's or a ScaledObject's phase (if any) and conditions."""
    status = obj.get("status") or {}
    conditions = " ".join(
        f"{c['type']}={c['status']}/{c.get('reason', '')}" for c in status.get("conditions") or []
    )
    return f"phase={status.get('phase')} {conditions}"


_summaries: dict[str, Callable[[Obj], str]] = {
    "Pod": _pod,
    "Deployment": _deployment,
    "Event": _event,
    "LLMService": _service,
    "ScaledObject": _service,
}
