"""List-then-watch of one resource kind into a local cache, with change notifications.

The `kubernetes` package's `SharedInformer` is not used: it hands update handlers only the new
object (an update predicate such as "generation changed" needs the old one too), re-delivers
every object as modified on each relist, retries a failing watch in a tight loop without
backoff, and has no answer to a kind the server does not serve. This one uses the package's
DynamicClient (any kind, CRDs included) and `Watch`, and retries, relists and times out as
client-go's reflector does, on purpose, so that the API server sees the load any controller
puts on it:

- transport failures (connection refused or reset, as while the API server restarts) and 429
  resume the watch from the last resourceVersion after a jittered, doubling, capped delay; a
  resourceVersion the server no longer has answers `410 Gone` (it does after a restart, when
  its watch cache starts afresh), and any other HTTP error also leads to a relist;
- the relist is diffed against the cache, so objects created, changed or deleted while the
  watch was down are delivered as add, update or delete, and unchanged ones are not;
- a kind the server does not serve yet (a CRD not installed) counts as an empty, synced cache
  and is looked up again periodically, so one missing CRD neither blocks start-up nor the rest;
  so does a kind the operator may not list where the watch says it may be refused
  (`WatchTarget.forbidden_is_empty`: RBAC a platform may withhold).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import methodcaller
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException
from kubernetes.watch import Watch

from .resources import (
    KindNotServed,
    ResourceKind,
    ResourceResolver,
    api_status,
    describe_error,
    read_json,
)
from .store import KubeObject, Store, StoreDiff, object_key

log = logging.getLogger(__name__)

HTTP_GONE = 410
HTTP_NOT_FOUND = 404
HTTP_FORBIDDEN = 403
LIST_PAGE_SIZE = 500
RESUMABLE = frozenset({None, 429})  # transport errors and throttling: the watch can resume


class EventHandler(Protocol):
    """Receives cache changes on the informer's thread: keep it quick (enqueue, do not call out)."""

    def on_add(self, obj: KubeObject) -> None: ...

    def on_update(self, old: KubeObject, new: KubeObject) -> None: ...

    def on_delete(self, obj: KubeObject) -> None: ...


@dataclass(frozen=True)
class WatchTarget:
    """What one informer lists and watches: a kind, optionally one namespace and selectors."""

    kind: ResourceKind
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    forbidden_is_empty: bool = False
    """A 403 on the list counts as an empty cache, looked at again like a kind not served: the
    objects of a kind the operator may be refused, which it can do without."""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        selectors = ",".join(filter(None, (self.label_selector, self.field_selector)))
        return f"{self.kind}{where}{f' [{selectors}]' if selectors else ''}"


@dataclass(frozen=True)
class InformerTiming:
    """Retry and timeout policy, in seconds; the defaults are the reflector's (module docstring)."""

    retry_initial: float = 0.8
    retry_max: float = 30.0
    watch_timeout_min: float = 300.0  # each watch asks the server to end it after min..2*min
    absent_kind_retry: float = 10.0
    resync_period: float | None = None  # re-deliver every cached object as an update
    request_timeout: float = 60.0
    connect_timeout: float = 10.0

    def __post_init__(self) -> None:
        for name in ("retry_initial", "retry_max", "watch_timeout_min", "absent_kind_retry"):
            if getattr(self, name) <= 0:
                raise ValueError(f"InformerTiming.{name} must be positive")
        if self.resync_period is not None and self.resync_period <= 0:
            raise ValueError("InformerTiming.resync_period must be positive or None")


class NotPermitted(Exception):
    """The API server refuses to list the kind to this client (RBAC)."""


class Informer:
    """Keeps `store` equal to the server's objects of `target` and tells handlers what changed."""

    def __init__(
        self,
        resolver: ResourceResolver,
        target: WatchTarget,
        timing: InformerTiming | None = None,
    ) -> None:
        self.target = target
        self.store = Store()
        self._resolver = resolver
        self._timing = timing or InformerTiming()
        self._handlers: list[EventHandler] = []
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: Any = None
        self._thread: threading.Thread | None = None
        self._resource_version = ""
        self._next_resync = 0.0
        self.relists = 0  # lists made (diagnostics and tests)
        self.failures = 0  # list or watch attempts that failed with an error other than 410

    def add_handler(self, handler: EventHandler) -> None:
        """Register before `start`; a handler added later misses the initial list."""
        self._handlers.append(handler)

    @property
    def synced(self) -> bool:
        """True once the first list (or the finding that the kind is not served) is in the cache."""
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"informer for {self.target} already started")
        self._thread = threading.Thread(
            target=self._run, name=f"informer {self.target}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching; the open watch connection is shut down so this returns promptly."""
        with self._lock:
            self._stopping.set()
        thread = self._thread
        if thread is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            # Repeated: `Watch.stream` resets its stop flag when it starts, and can only close a
            # connection once the response has arrived.
            with self._lock:
                watcher = self._watcher
            if watcher is not None:
                watcher.stop()
            thread.join(0.05)
            if not thread.is_alive():
                return
            if time.monotonic() >= deadline:
                log.warning("informer for %s did not stop within %.1fs", self.target, timeout)
                return

    def _run(self) -> None:
        delay = self._timing.retry_initial
        need_list = True
        while not self._stopping.is_set():
            attempt_started = time.monotonic()
            phase = "list" if need_list else "watch"
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch()
                self._resync_if_due()
                delay = self._timing.retry_initial
            except (KindNotServed, NotPermitted) as absent:
                self._deliver(self.store.replace(()))
                self._resource_version = ""
                self._synced.set()
                need_list = True
                log.info("%s; looking again in %.0fs", absent, self._timing.absent_kind_retry)
                self._stopping.wait(self._timing.absent_kind_retry)
            except Exception as error:
                if self._stopping.is_set():
                    break
                status = api_status(error)
                if status == HTTP_GONE:
                    log.info("watch of %s expired (410 Gone); relisting", self.target)
                    need_list = True
                    continue
                if status not in RESUMABLE:
                    need_list = True
                if time.monotonic() - attempt_started > self._timing.retry_max:
                    delay = self._timing.retry_initial  # it ran fine for a while before failing
                self.failures += 1
                log.warning(
                    "%s of %s failed (%s); %s in %.2fs",
                    phase,
                    self.target,
                    describe_error(error),
                    "relisting" if need_list else "resuming the watch",
                    delay,
                )
                self._stopping.wait(delay * random.uniform(1.0, 1.25))
                delay = min(delay * 2, self._timing.retry_max)

    def _list(self) -> None:
        resource = self._resolver.resolve(self.target.kind)
        try:
            items, version = self._list_pages(resource, LIST_PAGE_SIZE)
        except ApiException as error:
            if api_status(error) == HTTP_NOT_FOUND:
                missing = f"the API server no longer serves {self.target.kind}"
                raise KindNotServed(missing) from error
            if api_status(error) == HTTP_FORBIDDEN and self.target.forbidden_is_empty:
                raise NotPermitted(f"{self.target} may not be listed") from error
            if api_status(error) != HTTP_GONE:
                raise
            # A continue token expired between pages: list again in one request, with no token
            # to expire.
            items, version = self._list_pages(resource, None)
        for item in items:
            item.setdefault("apiVersion", self.target.kind.api_version)
            item.setdefault("kind", self.target.kind.kind)
            _drop_managed_fields(item)
        diff = self.store.replace(items)
        self._resource_version = version
        self.relists += 1
        if self._timing.resync_period is not None and not self._synced.is_set():
            self._next_resync = time.monotonic() + self._timing.resync_period
        self._synced.set()
        log.debug(
            "listed %s at %s: %d added, %d updated, %d deleted",
            self.target,
            version,
            len(diff.added),
            len(diff.updated),
            len(diff.deleted),
        )
        self._deliver(diff)

    def _list_pages(self, resource: Any, limit: int | None) -> tuple[list[KubeObject], str]:
        items: list[KubeObject] = []
        token: str | None = None
        while True:
            response = resource.get(
                namespace=self.target.namespace,
                label_selector=self.target.label_selector,
                field_selector=self.target.field_selector,
                limit=limit,
                _continue=token,
                serialize=False,
                _request_timeout=(self._timing.connect_timeout, self._timing.request_timeout),
            )
            page = read_json(response)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return items, str(metadata.get("resourceVersion") or "")

    def _watch(self) -> None:
        """One watch request, until the server ends it (its timeout) or an error is raised."""
        resource = self._resolver.resolve(self.target.kind)
        timeout = self._timing.watch_timeout_min * random.uniform(1.0, 2.0)
        if self._timing.resync_period is not None:
            timeout = min(timeout, max(1.0, self._next_resync - time.monotonic()))
        watcher = Watch()  # type: ignore[no-untyped-call]
        with self._lock:
            if self._stopping.is_set():
                return
            self._watcher = watcher
        try:
            stream = watcher.stream(  # type: ignore[no-untyped-call]
                resource.get,
                namespace=self.target.namespace,
                label_selector=self.target.label_selector,
                field_selector=self.target.field_selector,
                resource_version=self._resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=int(timeout),
                serialize=False,
                _request_timeout=(self._timing.connect_timeout, timeout + 30.0),
            )
            for event in stream:
                if self._stopping.is_set():
                    return
                if isinstance(event, dict):
                    self._apply(event)
        finally:
            with self._lock:
                self._watcher = None

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("raw_object")
        if not isinstance(obj, dict):
            return
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind in ("ADDED", "MODIFIED"):
            old = self.store.put(_drop_managed_fields(obj))
            if old is None:
                self._fire(methodcaller("on_add", obj))
            else:
                self._fire(methodcaller("on_update", old, obj))
        elif kind == "DELETED":
            self.store.pop(object_key(obj))
            self._fire(methodcaller("on_delete", obj))
        elif kind != "BOOKMARK":
            return
        if version:
            self._resource_version = version

    def _resync_if_due(self) -> None:
        period = self._timing.resync_period
        if period is None or time.monotonic() < self._next_resync:
            return
        self._next_resync = time.monotonic() + period
        for obj in self.store.list():
            self._fire(methodcaller("on_update", obj, obj))

    def _deliver(self, diff: StoreDiff) -> None:
        for obj in diff.deleted:
            self._fire(methodcaller("on_delete", obj))
        for obj in diff.added:
            self._fire(methodcaller("on_add", obj))
        for old, new in diff.updated:
            self._fire(methodcaller("on_update", old, new))

    def _fire(self, call: Callable[[EventHandler], object]) -> None:
        for handler in self._handlers:
            try:
                call(handler)
            except Exception:
                log.exception("event handler for %s failed", self.target)


def _drop_managed_fields(obj: KubeObject) -> KubeObject:
    """Server-side apply's field ownership is often the largest part of an object, and nothing
    reading a cache needs it: cached objects go without it, which bounds the cache's memory by
    the objects' content.
    """
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj
